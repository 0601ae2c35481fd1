"""The smaller suites of the benchmark harness at tiny sizes: the metadata
operations count (scripts/metadata_ops.py, real strace), the refresh
benchmark (scripts/bench_refresh.py) and the dynamo benchmark's
(scripts/bench_dynamo.py) command lines: their outputs are well-formed, each
variant does its job, and bad input is a clear error.  Real environments,
real interpreters, real epload; no timing is asserted."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
SCRIPTS = SOURCE_DIR / "scripts"


def run(script, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "TORCH_"))}
    env.update(EPLOAD_BUILD_DIR=str(BUILD_DIR), CI="true")
    return subprocess.run([PYTHON, str(SCRIPTS / script), *map(str, args)], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=timeout)


def test_metadata_ops_counts_every_variant(tmp_path):
    out = tmp_path / "m.json"
    proc = run("metadata_ops.py", "--dists", "40", "--env-dir", tmp_path / "env",
               "--json-out", out, "--md-out", tmp_path / "m.md")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert list(data["variants"]) == ["baseline", "importlib", "epload full", "epload paths",
                                      "shipped index"]
    v = data["variants"]
    # importlib opens every distribution's metadata; the shipped index none.
    assert v["importlib"]["openat"] - v["baseline"]["openat"] >= 40
    assert v["shipped index"]["metadata_ops"] < v["importlib"]["metadata_ops"]
    assert v["shipped index"]["wrote_cache_files"] == []
    md = (tmp_path / "m.md").read_text()
    assert md == proc.stdout
    assert "| shipped index |" in md and "| baseline |" not in md


@pytest.mark.parametrize("args,message", [
    (["--dists", "10"], "--dists must be at least 11"),
    (["--python", "/no/such/python"], "interpreter not found"),
])
def test_metadata_ops_usage_errors(args, message):
    proc = run("metadata_ops.py", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_metadata_ops_without_a_build_says_what_to_do(tmp_path):
    proc = run("metadata_ops.py", "--dists", "20", "--build", tmp_path)
    assert proc.returncode == 2
    assert f"no executable {tmp_path}/epload: build first" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--backends", "0"], "--backends must be >= 1"),
    (["--noise", "-1"], "--noise must be >= 0"),
])
def test_refresh_usage_errors(args, message):
    proc = run("bench_refresh.py", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_refresh_without_a_build_says_what_to_do(tmp_path):
    proc = run("bench_refresh.py", "--build", tmp_path)
    assert proc.returncode == 2
    assert f"no executable {tmp_path}/epload: build first" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--dists", "1"], "--dists must be >= 2"),
    (["--pth-rounds", "0"], "--pth-rounds must be >= 1"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--python", "/no/such/python"], "interpreter not found"),
])
def test_dynamo_usage_errors(args, message):
    proc = run("bench_dynamo.py", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_dynamo_without_the_floor_module_says_what_to_do(tmp_path):
    proc = run("bench_dynamo.py", "--build", tmp_path, "--python", PYTHON)
    assert proc.returncode == 2
    assert (f"no {tmp_path}/bench/_epload_floor_stats.*.so (the floor, "
            "bench/floor_stats_module.cpp): build first") in proc.stderr, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--dists", "x"], "--dists must be comma-separated integers, got 'x'"),
    (["--dists", "0"], "--dists: each count must be at least 1"),
    (["--build", "/nonexistent"], "no epload package in /nonexistent/python"),
    (["--before", "/nonexistent"], "--before: no epload package in /nonexistent/python"),
])
def test_hosts_suite_bad_input_is_a_clear_error(args, message):
    proc = run("bench_hosts.py", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr

"""`epload bench`: the command hands over to `python -m epload.bench` of the
Python of its environment (here the build tree's: its python/ package first on
PYTHONPATH, $EPLOAD_PYTHON the interpreter); its help, exit statuses and
errors are the harness's."""

import os
import pathlib
import subprocess

BUILD = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", "build")).resolve()
EPLOAD = BUILD / "epload"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


def bench(*args, python=PYTHON):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "PYTHON"))}
    env["EPLOAD_PYTHON"] = python
    return subprocess.run([str(EPLOAD), "bench", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)


def test_help_is_the_harness_help():
    proc = bench("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: epload bench")
    assert "--fail-over PCT" in proc.stdout and "--synthetic N[,N...]" in proc.stdout


def test_a_usage_error_is_status_2():
    proc = bench("--rounds", "1")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "epload bench: error: argument --rounds: --rounds must be >= 2")


def test_the_command_is_listed():
    proc = subprocess.run([str(EPLOAD), "--help"], capture_output=True, text=True)
    assert any(ln.split()[:1] == ["bench"] for ln in proc.stdout.splitlines())


def test_a_python_that_cannot_run_is_one_message():
    proc = bench("--help", python="/no/such/python3")
    assert proc.returncode == 1
    assert proc.stderr == ("epload: bench: cannot run /no/such/python3 (the Python of epload's "
                           "environment; set EPLOAD_PYTHON to another): No such file or "
                           "directory\n")

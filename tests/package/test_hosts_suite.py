"""The plugin hosts' benchmark suite (scripts/bench_hosts.py) at a tiny size,
end to end: it makes a venv with pytest and flake8 from pip's index (hence
the package layer, which needs PyPI), runs every variant of both hosts and
reports.  Real hosts, real interpreters, real epload; no timing is asserted."""

import json
import os
import pathlib
import subprocess

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


def test_hosts_suite_runs_real_hosts_and_reports(tmp_path):
    """bench_hosts.py at a tiny size: a venv with pytest and flake8 from
    pip's index, every variant of both hosts run (their outputs checked equal
    by the suite), the walk timed in-process, beside a build given as
    --before (the same one here), with the floor of `full`'s stats and the
    whole-process floor (walks at hand; its output checked equal too)."""
    out = tmp_path / "h.json"
    proc = run("bench_hosts.py", "--dists", "20", "--rounds", "1", "--warmup", "0", "--walks", "1",
               "--env-dir", tmp_path / "env", "--json-out", out, "--md-out", tmp_path / "h.md",
               "--before", BUILD_DIR, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    size = data["sizes"]["20"]
    assert sorted(size["stats"]) == sorted(
        f"{h} {v}" for h in ("pytest", "flake8")
        for v in ("without", "stock", "switch", "paths", "floor", "before switch", "before paths", "after switch",
                  "after paths"))
    walk = size["walk"]
    assert walk["dists"] >= 20 and len(walk["first_epload"]) == len(walk["first_before"]) == 1
    assert len(walk["floor_stats"]) == 1 and walk["before"]["module"].startswith(str(BUILD_DIR))
    md = (tmp_path / "h.md").read_text()
    assert "switch, --before" in md and "floor: walks at hand" in md

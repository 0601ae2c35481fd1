"""Shared fixtures for the Python-level tests: where the build is, and how to
ask both importlib.metadata (the oracle) and epload the same question."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # difftrees and other helpers

PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")

# Runs in a fresh `python -I -S` (no site: nothing added to sys.path), which
# first imports everything the email parser will need lazily (sys.path is
# about to point at the crafted tree only), then assigns sys.path and asks
# importlib.metadata.  Prints {"ok": [[group, name, value, dist, version]...]}
# in importlib's order, or {"error": "..."} when importlib raises.
ORACLE = r"""
import sys, json, itertools
import email.parser, email.feedparser, email.message, email._policybase, email.errors
import importlib.metadata as md
sys.path[:] = json.loads(sys.argv[1])
try:
    eps = md.entry_points()
except Exception as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
    raise SystemExit(0)
out = []
# 3.11: a SelectableGroups dict (its values: no deprecation warning); 3.12+:
# EntryPoints in discovery order.  Both in 3.11's order, the CLI's: groups
# sorted, discovery order within a group.
flat = itertools.chain.from_iterable(dict.values(eps)) if isinstance(eps, dict) else eps
for ep in sorted(flat, key=lambda ep: ep.group):
    try:
        name = ep.dist.name  # METADATA's Name, exactly as written
    except Exception:  # METADATA unreadable
        name = None
    try:
        version = ep.dist.version
    except Exception:
        version = None
    out.append([ep.group, ep.name, ep.value, name, version])
print(json.dumps({"ok": out}))
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, and none of the switches that
    change how epload answers (for in-process tests that ask it directly)."""
    monkeypatch.setenv("EPLOAD_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("EPLOAD_VALIDATE", "EPLOAD_NO_CACHE", "EPLOAD_DEBUG"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def epload_bin():
    build = os.environ.get("EPLOAD_BUILD_DIR")
    if not build:
        pytest.skip("EPLOAD_BUILD_DIR is not set (run through ctest)")
    exe = pathlib.Path(build) / "epload"
    if not exe.exists():
        pytest.fail(f"{exe} does not exist: build the 'epload' target first")
    return str(exe)


def run_importlib(paths, cwd=None):
    """importlib.metadata.entry_points() for `paths`, in a subprocess."""
    p = subprocess.run([PYTHON, "-I", "-S", "-c", ORACLE, json.dumps(paths)],
                       cwd=cwd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"oracle crashed:\n{p.stderr}"
    return json.loads(p.stdout)


def run_epload(exe, paths, cwd=None):
    """`epload entry-points --no-cache --path ... --json`: (returncode, rows or
    None, stderr), rows in the oracle's shape."""
    argv = [exe, "entry-points", "--no-cache", "--json"] + [f"--path={p}" for p in paths]
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    rows = None
    if p.returncode == 0:
        # "dist" and "version" are null where importlib raises reading them
        # (an unreadable METADATA), which the oracle reports as None.
        rows = [[e["group"], e["name"], e["value"], e["dist"] or "", e["version"] or ""]
                for e in json.loads(p.stdout)]
    return p.returncode, rows, p.stderr

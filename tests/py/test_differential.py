"""Differential test: epload's entry points must equal importlib.metadata's.

The oracle is /usr/bin/python3's own importlib.metadata, run in a subprocess
with sys.path set to exactly the search paths under test.  epload is the CLI
`epload entry-points --no-cache --json`.  Compared: the (group, name, value,
distribution name (`ep.dist.name`), version) list in order; where importlib raises,
epload must exit 1 with a message naming the offending file.

Crafted trees (difftrees.py) cover each discovery and parsing rule; the real
sys.path of the interpreter is checked directory by directory and as a whole.
"""

import json
import os
import pathlib
import stat
import subprocess

import pytest

import difftrees
from conftest import PYTHON, run_epload, run_importlib


def _restore_permissions(root: pathlib.Path):
    # Cases chmod things to 0; give them back so the temp tree can be removed.
    for dirpath, dirnames, filenames in os.walk(root, topdown=True):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)


def _compare(exe, paths, cwd=None, compare_dist=True):
    """Runs both sides; returns (oracle, rc, rows, stderr) after checking that
    they agree on success and on the answer."""
    oracle = run_importlib(paths, cwd)
    rc, rows, err = run_epload(exe, paths, cwd)
    if "ok" in oracle:
        assert rc == 0, f"importlib answered but epload failed (exit {rc}):\n{err}"
        want = oracle["ok"]
        got = rows
        if not compare_dist:
            want = [r[:3] for r in want]
            got = [r[:3] for r in got]
        else:
            # importlib gives None for a missing Name or Version header (or
            # raises reading an unreadable METADATA); epload gives "".
            want = [r[:3] + [r[3] or "", r[4] or ""] for r in want]
        assert got == want
    else:
        assert rc == 1, (f"importlib raised ({oracle['error']}) but epload exited {rc}\n"
                         f"stdout rows: {rows}")
    return oracle, rc, rows, err


@pytest.mark.parametrize("name", sorted(difftrees.CASES))
def test_crafted_tree(name, tmp_path, epload_bin):
    root = tmp_path / "tree"
    root.mkdir()
    try:
        c = difftrees.CASES[name](root)
        if c.skip:
            pytest.skip(c.skip)
        if c.expect == difftrees.UNSUPPORTED:
            # importlib reads the archive; epload must refuse, naming it.
            oracle = run_importlib(c.paths, c.cwd)
            assert "ok" in oracle and oracle["ok"], f"fixture: importlib should read the zip: {oracle}"
            rc, rows, err = run_epload(epload_bin, c.paths, c.cwd)
            assert rc == 1, f"epload should refuse a zip holding distributions, got {rows}"
            assert c.names in err and "zip" in err, err
            return
        oracle, rc, rows, err = _compare(epload_bin, c.paths, c.cwd, c.compare_dist)
        if c.expect == difftrees.RAISES:
            assert "error" in oracle, f"fixture: importlib should raise, answered {oracle}"
            assert c.names in err, f"epload's message should name {c.names!r}:\n{err}"
        else:
            assert "ok" in oracle, f"fixture: importlib raised {oracle['error']}"
            if c.nonempty:
                assert oracle["ok"], "fixture: expected some entry points"
    finally:
        _restore_permissions(root)


def _real_sys_path():
    p = subprocess.run([PYTHON, "-c", "import sys, json; print(json.dumps(sys.path))"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


REAL_SYS_PATH = _real_sys_path()


@pytest.mark.parametrize("path", REAL_SYS_PATH, ids=lambda p: p or "<cwd>")
def test_real_sys_path_entry(path, epload_bin):
    # '' is run from the source tree, as ctest does.
    _compare(epload_bin, [path], cwd=os.environ.get("EPLOAD_SOURCE_DIR"))


def test_real_sys_path_whole(epload_bin):
    oracle, *_ = _compare(epload_bin, REAL_SYS_PATH, cwd=os.environ.get("EPLOAD_SOURCE_DIR"))
    assert "ok" in oracle


def test_case_count():
    # The brief for this suite: at least 25 distinct crafted cases.
    assert len(difftrees.CASES) >= 25


def test_generated_environment(tmp_path, epload_bin):
    # A synthetic site-packages large enough for the scanner to split its
    # reads between threads, with egg-info directories and files among
    # dist-infos (scripts/gen_env.py).  Python backends: only the metadata
    # is compared, and no C compiler is needed (an emulated arm64 root has
    # none: scripts/arm64_check.sh).
    source = os.environ.get("EPLOAD_SOURCE_DIR", str(pathlib.Path(__file__).resolve().parents[2]))
    out = tmp_path / "env"
    subprocess.run([PYTHON, os.path.join(source, "scripts", "gen_env.py"), "--backends", "40",
                    "--noise", "700", "--kind", "python", str(out)], check=True, capture_output=True)
    oracle, *_ = _compare(epload_bin, [str(out / "site-packages")])
    assert len(oracle["ok"]) > 700

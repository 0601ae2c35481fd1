"""A file system that keeps whole-second times (here a real ext2 with 128-byte
inodes, loop-mounted) truncates every time it stores: a same-size rewrite of
`entry_points.txt` in the second the cache was written leaves the file's
stamp exactly as the cache recorded it.  The racy rule must still catch it
(ARCHITECTURE.md, "The cache rule"), through the CLI's cache file and the
Python API's in-process re-validation; and once the second is over, the cache
must hit again.

Needs root, mke2fs and a loop device (the test says so and skips otherwise:
mounting is the only way to get a real coarse-time file system)."""

import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


@pytest.fixture(scope="module")
def coarse(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("mounting a whole-second file system needs root")
    mke2fs = shutil.which("mke2fs") or shutil.which("mke2fs", path="/usr/sbin:/sbin")
    if mke2fs is None:
        pytest.skip("mke2fs (e2fsprogs) is not installed")
    base = tmp_path_factory.mktemp("coarse")
    image, mnt = base / "ext2.img", base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    subprocess.run([mke2fs, "-q", "-t", "ext2", "-I", "128", "-F", str(image)],
                   check=True, capture_output=True)
    p = subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext2 image here: {p.stderr.strip()}")
    try:
        probe = mnt / "probe"
        probe.write_text("x")
        if probe.stat().st_mtime_ns % 1_000_000_000 != 0:
            pytest.skip("this ext2 keeps sub-second times")
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def make_dist(site):
    d = site / "a-1.0.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: a\nVersion: 1.0\n")
    return d / "entry_points.txt"


def at_second_start():
    """Waits until 10 ms into a second, so that what follows fits in it."""
    while not 0.01 <= time.time() % 1 < 0.05:
        time.sleep(0.004)


def same_second_rewrites(ep_file, query, tries=5):
    """Writes, queries (which caches), rewrites with the same size and
    queries again, all in one second, until the rewrite really kept the
    file's stamp; returns the two answers of that trial."""
    for n in range(tries):
        at_second_start()
        ep_file.write_text(f"[g]\nx = a:v{n}a\n")
        before = query()
        st = ep_file.stat()
        with open(ep_file, "r+") as f:
            f.write(f"[g]\nx = a:v{n}b\n")
        st2 = ep_file.stat()
        after = query()
        if (st.st_mtime_ns, st.st_ctime_ns, st.st_size) == (st2.st_mtime_ns, st2.st_ctime_ns, st2.st_size):
            return n, before, after
    pytest.fail(f"no rewrite in {tries} tries kept the file's stamp (is the file system coarse?)")


def test_cli_cache_sees_a_same_second_rewrite(coarse, tmp_path):
    site = coarse / "cli" / "site"
    ep_file = make_dist(site)
    cache = tmp_path / "cache"
    cmd = [EPLOAD, "entry-points", "--path", str(site), "--group", "g", "--json",
           "--cache-dir", str(cache)]

    def query():
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return [e["value"] for e in json.loads(p.stdout)]

    n, before, after = same_second_rewrites(ep_file, query)
    assert before == [f"a:v{n}a"]
    assert after == [f"a:v{n}b"]
    # Not by giving up on caching: past the granule, the cache hits.
    time.sleep(2.2)
    query()
    p = subprocess.run(cmd + ["--verbose"], capture_output=True, text=True)
    assert "cache hit" in p.stderr, p.stderr
    assert [e["value"] for e in json.loads(p.stdout)] == [f"a:v{n}b"]


def test_python_api_sees_a_same_second_rewrite(coarse, tmp_path):
    site = coarse / "py" / "site"
    ep_file = make_dist(site)
    code = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import epload
sys.path.insert(0, sys.argv[2])
ep = sys.argv[3]
def query():
    return [e.value for e in epload.entry_points(group="g")]
for n in range(5):
    while not 0.01 <= time.time() % 1 < 0.05:
        time.sleep(0.004)
    with open(ep, "w") as f:
        f.write(f"[g]\nx = a:v{n}a\n")
    before = query()
    st = os.stat(ep)
    with open(ep, "r+") as f:
        f.write(f"[g]\nx = a:v{n}b\n")
    st2 = os.stat(ep)
    after = query()
    if (st.st_mtime_ns, st.st_ctime_ns) == (st2.st_mtime_ns, st2.st_ctime_ns):
        print(before, after, f"a:v{n}b")
        break
"""
    env = dict(os.environ, EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([PYTHON, "-I", "-c", code, str(BUILD_DIR / "python"), str(site), str(ep_file)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip(), "no rewrite kept the file's stamp"
    before, after, want = p.stdout.strip().rsplit(" ", 2)
    assert after == f"['{want}']", p.stdout

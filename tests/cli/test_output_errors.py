"""Output that cannot be written is an error, never a silent success: every
`epload` command whose standard output is a full disk (/dev/full), a closed
descriptor, or a pipe whose reader went away exits 1 and says why on stderr
(or dies of SIGPIPE, like any Unix filter, when SIGPIPE has its default
action).  Real processes, real descriptors."""

import json
import os
import pathlib
import signal
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")
GEN = SOURCE_DIR / "scripts" / "gen_env.py"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    # Enough ordinary distributions that `entry-points` prints more than a
    # pipe holds (64 KB), so a reader that goes away is noticed mid-answer.
    proc = subprocess.run([PYTHON, str(GEN), str(out), "--backends", "4", "--noise", "1500"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "manifest.json").read_text())["search_path"]


def commands(site, cache):
    index = ["--path", site, "--cache-dir", str(cache)]
    return [
        ["--version"],
        ["--help"],
        ["entry-points", *index],
        ["entry-points", "--json", *index],
        ["devices", *index],
        ["index", "show", *index],
        ["index", "path", *index],
        ["load", "--json", "dev0001", *index],
    ]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_is_an_error_with_its_cause(site, tmp_path):
    for argv in commands(site, tmp_path / "cache"):
        with open("/dev/full", "w") as full:
            p = subprocess.run([EPLOAD, *argv], stdout=full, stderr=subprocess.PIPE, text=True)
        assert p.returncode == 1, (argv, p.stderr)
        assert "epload: cannot write to standard output" in p.stderr, (argv, p.stderr)
    # The commands that print a large answer also name the cause.
    with open("/dev/full", "w") as full:
        p = subprocess.run([EPLOAD, *commands(site, tmp_path / "cache")[2]], stdout=full,
                           stderr=subprocess.PIPE, text=True)
    assert "No space left on device" in p.stderr, p.stderr


def test_closed_standard_output_is_an_error(site, tmp_path):
    for argv in commands(site, tmp_path / "cache"):
        p = subprocess.run([EPLOAD, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, preexec_fn=lambda: os.close(1))
        assert p.returncode == 1, (argv, p.stderr)
        assert "cannot write to standard output" in p.stderr, (argv, p.stderr)


@pytest.mark.parametrize("sigpipe", ["ignored", "default"])
def test_reader_going_away_mid_answer(site, tmp_path, sigpipe):
    def setup():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN if sigpipe == "ignored" else signal.SIG_DFL)
    p = subprocess.Popen([EPLOAD, "entry-points", "--path", site, "--cache-dir", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=setup)
    assert len(p.stdout.read(100)) == 100
    p.stdout.close()  # the reader goes away; epload still has more than a pipe's worth to write
    err = p.stderr.read().decode()
    status = p.wait()
    if sigpipe == "ignored":
        assert status == 1, err
        assert "epload: cannot write to standard output: Broken pipe" in err
    else:
        assert status == -signal.SIGPIPE, (status, err)


def test_file_size_limit_is_met_like_a_full_disk(site, tmp_path):
    """Under `ulimit -f`, a cache file too large for the limit is not written
    (a warning naming it and the cause), the answer is printed all the same,
    and no temporary file is left; `index build`, whose answer is that file,
    fails with the cause.  Never death by SIGXFSZ.  (subprocess gives the
    child SIGXFSZ's default action, which Python itself ignores.)"""
    cache = tmp_path / "cache"
    limited = ["bash", "-c", 'ulimit -f 1 && exec "$@"', "bash", EPLOAD]
    index = ["--path", site, "--cache-dir", str(cache)]
    expected = subprocess.run([EPLOAD, "entry-points", "--path", site, "--no-cache"], capture_output=True,
                              text=True, check=True).stdout
    p = subprocess.run([*limited, "entry-points", *index], capture_output=True, text=True)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == expected
    assert "epload: warning: the index was not cached" in p.stderr, p.stderr
    assert "File too large" in p.stderr and str(cache) in p.stderr, p.stderr
    assert [f for f in os.listdir(cache) if ".tmp." in f] == []
    p = subprocess.run([*limited, "index", "build", *index], capture_output=True, text=True)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "File too large" in p.stderr and str(cache) in p.stderr, p.stderr
    assert [f for f in os.listdir(cache) if ".tmp." in f] == []

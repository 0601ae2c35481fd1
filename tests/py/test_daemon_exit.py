"""Daemon threads inside entry_points() when the program exits: the
program's own exit status stands (sys.exit(3) is 3), never an abort.

CPython 3.10-3.13 end a daemon thread that asks for the GIL once the
interpreter is finalizing by unwinding its stack (pthread_exit); the threads
here spend most of their time inside a query with the GIL released (the
`full` check's stats, refreshes of a tree one of them keeps changing), so
that the main thread's exit finds some of them there.  Both through
epload.entry_points() and through EPLOAD_IMPORTLIB=1 with a program that
only calls importlib.metadata.  Run from the build tree (its interpreter)
and, by package.installed_wheels, in each release wheel's venv (each
CPython)."""

import os
import shutil
import subprocess

import pytest

from pyfixtures import PACKAGE_DIR, PYTHON, env_for, make_dist

PROGRAM = r'''
import os, sys, threading, time
site, api = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
if api == "epload":
    import epload
    entry_points = epload.entry_points
else:
    import importlib.metadata  # epload's only through EPLOAD_IMPORTLIB=1
    entry_points = importlib.metadata.entry_points
print(entry_points.__module__, flush=True)
counts = [0] * 4


def rewrite(i):
    path = os.path.join(site, "dx%04d-1.0.dist-info" % (i % 50), "entry_points.txt")
    with open(path + ".tmp", "w") as f:
        f.write("[dx.group]\ndx%04d = dx:v%d\n[dx.other]\nx = y\n" % (i % 50, i))
    os.replace(path + ".tmp", path)


def query(k):
    i = 0
    while True:
        if k == 0:
            rewrite(i)  # the others' next queries refresh
        eps = entry_points(group="dx.other" if i % 3 == 2 else "dx.group")
        assert len(eps) > 0
        counts[k] += 1
        i += 1


for k in range(len(counts)):
    threading.Thread(target=query, args=(k,), daemon=True).start()
while min(counts) < 3:
    time.sleep(0.001)
time.sleep(0.01 * int(sys.argv[3]))
sys.exit(3)
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Enough distributions that the `full` check of a query takes a while."""
    root = tmp_path_factory.mktemp("daemon-site")
    for n in range(800):
        make_dist(str(root), "dx%04d" % n, entry_points={"dx.group": [f"dx{n:04d} = dx:main"],
                                                          "dx.other": ["x = y"]})
    return root


def hooked_python(tmp_path):
    """An interpreter whose site runs epload's .pth hook: the one under test
    when epload is installed in it (a release wheel's venv), else a venv that
    sees the built package (a path line, as an editable install has) and
    holds the hook file."""
    if not os.path.isdir(os.path.join(PACKAGE_DIR, "epload")):
        return PYTHON
    root = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    purelib = subprocess.run([python, "-c", 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                             check=True, capture_output=True, text=True).stdout.strip()
    # .pth files run in name order: the path line before the hook's.
    with open(os.path.join(purelib, "_epload_build.pth"), "w") as f:
        f.write(PACKAGE_DIR + "\n")
    shutil.copyfile(os.path.join(PACKAGE_DIR, "epload-autoload.pth"), os.path.join(purelib, "epload-autoload.pth"))
    return python


def run_exits(python, site, api, tmp_path, **extra):
    """Runs PROGRAM a few times (the main thread exiting at a different moment
    each time); every run's (status, stderr tail)."""
    env = env_for(tmp_path, extra=extra)
    if python != PYTHON:
        env.pop("PYTHONPATH")  # the venv's own .pth files find the package
    out = []
    for delay in range(4):
        proc = subprocess.run([python, "-c", PROGRAM, str(site), api, str(delay)], env=env, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=300)
        out.append((proc.returncode, proc.stdout.split("\n")[0], proc.stderr[-1500:]))
    return out


def test_daemon_threads_inside_entry_points_at_exit(site, tmp_path):
    runs = run_exits(PYTHON, site, "epload", tmp_path)
    assert all(r[1] == "epload._entry_points" for r in runs), runs
    assert [r[0] for r in runs] == [3] * len(runs), runs


def test_daemon_threads_inside_importlib_switch_at_exit(site, tmp_path):
    runs = run_exits(hooked_python(tmp_path), site, "importlib", tmp_path, EPLOAD_IMPORTLIB="1")
    # The program never names epload: the switch answered its calls.
    assert all(r[1] == "epload._entry_points" for r in runs), runs
    assert [r[0] for r in runs] == [3] * len(runs), runs

"""How the build gets simdjson (top-level CMakeLists.txt, EPLOAD_SIMDJSON):
real configure runs of this checkout into temporary build trees, with the
network made unreachable (an HTTP proxy on a closed port), so every case
that must fall back does, and a tarball already at hand builds offline."""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
PINNED = "3.0.1"  # the source package CMakeLists.txt pins (Debian 12's)
TARBALL = f"simdjson_{PINNED}.orig.tar.gz"


def installed_simdjson():
    """The libsimdjson-dev version this build tree's configure found."""
    cache = (BUILD_DIR / "CMakeCache.txt").read_text()
    config = pathlib.Path(re.search(r"^simdjson_DIR:PATH=(.*)$", cache, re.M).group(1))
    return re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)',
                     (config / "simdjson-config-version.cmake").read_text()).group(1)


# Why the source cannot be had offline: the download, where the installed
# simdjson is the pinned version; the version itself where it is not (Debian 13).
UNAVAILABLE = ("cannot fetch" if installed_simdjson() == PINNED else
               f"libsimdjson-dev is {installed_simdjson()}, the pinned source is {PINNED}")


def configure(tmp_path, deps, *options):
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env["http_proxy"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # nothing listens there
    return subprocess.run(["cmake", "-S", str(SOURCE_DIR), "-B", str(tmp_path / "b"),
                           f"-DEPLOAD_PYTHON={PYTHON}", f"-DEPLOAD_DEPS_DIR={deps}", *options],
                          capture_output=True, text=True, env=env, timeout=300)


def said(proc):
    """What configure said on stderr, with CMake's line wrapping undone."""
    return " ".join(proc.stderr.split())


def linkage(proc):
    m = re.search(r"epload: simdjson \S+, (source|shared)", proc.stdout)
    assert m, (proc.stdout, proc.stderr)
    return m.group(1)


def build_tarball():
    """The tarball this build tree's configure checked, if it had one."""
    cache = (BUILD_DIR / "CMakeCache.txt").read_text()
    m = re.search(r"^EPLOAD_DEPS_DIR:PATH=(.*)$", cache, re.M)
    path = pathlib.Path(m.group(1)) / TARBALL if m else None
    return path if path and path.is_file() else None


def test_unreachable_source_falls_back_to_the_shared_library_and_says_so(tmp_path):
    proc = configure(tmp_path, tmp_path / "deps")
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "shared"
    assert "linking Debian's libsimdjson.so instead" in said(proc) and UNAVAILABLE in said(proc)
    assert not list((tmp_path / "deps").glob("*.part"))  # nothing half-written is left


def test_corrupt_tarball_is_not_used(tmp_path):
    deps = tmp_path / "deps"
    deps.mkdir()
    (deps / TARBALL).write_bytes(b"not a tarball")
    proc = configure(tmp_path, deps)
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "shared"
    assert UNAVAILABLE in said(proc)


def test_source_required_but_unavailable_is_a_configure_error(tmp_path):
    proc = configure(tmp_path, tmp_path / "deps", "-DEPLOAD_SIMDJSON=source")
    assert proc.returncode != 0
    assert f"EPLOAD_SIMDJSON=source, but {UNAVAILABLE}" in said(proc)


def test_unknown_choice_is_a_configure_error(tmp_path):
    proc = configure(tmp_path, tmp_path / "deps", "-DEPLOAD_SIMDJSON=static")
    assert proc.returncode != 0
    assert "EPLOAD_SIMDJSON must be auto, source or shared, not 'static'" in proc.stderr


@pytest.mark.skipif(build_tarball() is None, reason="this build tree links the shared library: no tarball")
def test_tarball_at_hand_builds_offline_from_source(tmp_path):
    deps = tmp_path / "deps"
    deps.mkdir()
    shutil.copyfile(build_tarball(), deps / TARBALL)
    proc = configure(tmp_path, deps, "-DEPLOAD_SIMDJSON=source")
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "source"
    assert "fetching" not in proc.stdout
    assert (deps / f"simdjson-impl-{PINNED}" / "simdjson.cpp").is_file()

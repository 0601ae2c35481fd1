"""How the build gets simdjson (top-level CMakeLists.txt, EPLOAD_SIMDJSON;
cmake/simdjson_pin.cmake): real configure runs of this checkout into
temporary build trees, and real runs of the set-up's fetch script
(cmake/fetch_deps.cmake), all with the network made unreachable (an HTTP
proxy on a closed port).  A configure never downloads and never writes into
the source tree or the deps cache: it uses a tarball at hand or falls back."""

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
PINNED = "3.0.1"  # the one source package cmake/simdjson_pin.cmake pins (Debian 12's)
TARBALL = f"simdjson_{PINNED}.orig.tar.gz"


def installed_simdjson():
    """The libsimdjson-dev version this build tree's configure found."""
    cache = (BUILD_DIR / "CMakeCache.txt").read_text()
    config = pathlib.Path(re.search(r"^simdjson_DIR:PATH=(.*)$", cache, re.M).group(1))
    return re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)',
                     (config / "simdjson-config-version.cmake").read_text()).group(1)


# Where the installed simdjson is not the pinned one (Debian 13), no tarball
# can be used, and the configure says that before anything about a tarball.
INSTALLED = installed_simdjson()
UNPINNED = None if INSTALLED == PINNED else f"libsimdjson-dev is {INSTALLED}, the pinned sources are"


def offline_env():
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env["http_proxy"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # nothing listens there
    return env


def configure(tmp_path, deps, *options):
    return subprocess.run(["cmake", "-S", str(SOURCE_DIR), "-B", str(tmp_path / "b"),
                           f"-DEPLOAD_PYTHON={PYTHON}", f"-DEPLOAD_DEPS_DIR={deps}", *options],
                          capture_output=True, text=True, env=offline_env(), timeout=300)


def fetch(deps, version="3.0.1", apt_config=None):
    env = offline_env()
    if apt_config:
        env["APT_CONFIG"] = str(apt_config)
    return subprocess.run(["cmake", f"-DSIMDJSON_VERSION={version}", f"-DEPLOAD_DEPS_DIR={deps}",
                           "-P", str(SOURCE_DIR / "cmake" / "fetch_deps.cmake")],
                          capture_output=True, text=True, env=env, timeout=300)


def apt_sources(tmp_path, *archives):
    """An apt configuration (for APT_CONFIG) whose sources are `deb` lines for
    the given local archive directories, in that order, and nothing else."""
    conf = tmp_path / "apt"
    (conf / "sources.list.d").mkdir(parents=True)
    (conf / "sources.list").write_text(
        "".join(f"deb [trusted=yes] file:{a} bookworm main\n" for a in archives))
    (conf / "apt.conf").write_text(f'Dir::Etc::sourcelist "{conf}/sources.list";\n'
                                   f'Dir::Etc::sourceparts "{conf}/sources.list.d";\n')
    return conf / "apt.conf"


def archive_with(tmp_path, name, content):
    """A local Debian archive holding one file in simdjson's pool directory."""
    archive = tmp_path / name
    pool = archive / "pool" / "main" / "s" / "simdjson"
    pool.mkdir(parents=True)
    (pool / TARBALL).write_bytes(content)
    return archive


def said(proc):
    """stderr with CMake's line wrapping undone."""
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


def source_tree():
    """The checkout's files, less git's, build trees and generated output."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(SOURCE_DIR):
        rel = os.path.relpath(dirpath, SOURCE_DIR)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d != ".git" and not d.startswith("build") and d != "out"]
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        out.update(os.path.join(rel, n) for n in dirnames + filenames)
    return out


def test_missing_tarball_falls_back_to_the_shared_library_and_says_so(tmp_path):
    before = source_tree()
    proc = configure(tmp_path, tmp_path / "deps")
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "shared"
    assert "linking Debian's libsimdjson.so instead" in said(proc)
    assert (UNPINNED or "scripts/setup.sh fetches it") in said(proc) and "fetching" not in proc.stdout
    assert not (tmp_path / "deps").exists()  # the configure wrote nothing there
    assert source_tree() == before           # nor into the checkout


def test_corrupt_tarball_is_not_used(tmp_path):
    deps = tmp_path / "deps"
    deps.mkdir()
    (deps / TARBALL).write_bytes(b"not a tarball")
    proc = configure(tmp_path, deps)
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "shared"
    if UNPINNED:
        assert UNPINNED in said(proc)
    else:
        assert "expected 156b1bc5" in said(proc) and "delete it and run scripts/setup.sh" in said(proc)
    assert (deps / TARBALL).read_bytes() == b"not a tarball" and os.listdir(deps) == [TARBALL]


def test_source_required_but_unavailable_is_a_configure_error(tmp_path):
    proc = configure(tmp_path, tmp_path / "deps", "-DEPLOAD_SIMDJSON=source")
    assert proc.returncode != 0
    assert f"EPLOAD_SIMDJSON=source, but {UNPINNED or 'no '}" in said(proc)


def test_unknown_choice_is_a_configure_error(tmp_path):
    proc = configure(tmp_path, tmp_path / "deps", "-DEPLOAD_SIMDJSON=static")
    assert proc.returncode != 0
    assert "EPLOAD_SIMDJSON must be auto, source or shared, not 'static'" in said(proc)


@pytest.mark.skipif(build_tarball() is None, reason="this build tree links the shared library: no tarball")
def test_tarball_at_hand_builds_offline_from_source(tmp_path):
    deps = tmp_path / "deps"
    deps.mkdir()
    shutil.copyfile(build_tarball(), deps / TARBALL)
    before = source_tree()
    proc = configure(tmp_path, deps, "-DEPLOAD_SIMDJSON=source")
    assert proc.returncode == 0, proc.stderr
    assert linkage(proc) == "source"
    assert (tmp_path / "b" / f"simdjson-impl-{PINNED}" / "simdjson.cpp").is_file()  # in the build tree
    assert os.listdir(deps) == [TARBALL] and source_tree() == before


def test_setup_fetch_offline_warns_and_leaves_nothing(tmp_path):
    deps = tmp_path / "deps"
    proc = fetch(deps)
    assert proc.returncode == 0, proc.stderr  # the set-up goes on: the build has a fallback
    assert "cannot fetch" in said(proc) and "link the shared libsimdjson" in said(proc)
    assert not deps.exists() or os.listdir(deps) == []


def test_setup_fetch_of_an_unpinned_version_says_so(tmp_path):
    proc = fetch(tmp_path / "deps", version="9.9.9")
    assert proc.returncode == 0, proc.stderr
    assert "no pinned source for simdjson '9.9.9'" in proc.stdout
    assert not (tmp_path / "deps").exists()


@pytest.mark.skipif(build_tarball() is None, reason="this build tree links the shared library: no tarball")
def test_setup_fetch_keeps_a_good_tarball_and_replaces_a_corrupt_one_only_when_it_can(tmp_path):
    deps = tmp_path / "deps"
    deps.mkdir()
    shutil.copyfile(build_tarball(), deps / TARBALL)
    proc = fetch(deps)
    assert proc.returncode == 0 and "fetching" not in proc.stdout + proc.stderr
    (deps / TARBALL).write_bytes(b"corrupt")
    proc = fetch(deps)
    assert proc.returncode == 0 and "cannot fetch" in said(proc)
    assert os.listdir(deps) == [TARBALL]  # offline: the bad file stays, the configure rejects it


@pytest.mark.skipif(build_tarball() is None, reason="this build tree links the shared library: no tarball")
def test_setup_fetch_takes_the_tarball_from_the_archives_apt_is_configured_with(tmp_path):
    good = build_tarball().read_bytes()
    empty = tmp_path / "empty"
    empty.mkdir()
    deps = tmp_path / "deps"
    proc = fetch(deps, apt_config=apt_sources(tmp_path, empty, archive_with(tmp_path, "mirror", good)))
    assert proc.returncode == 0, proc.stderr
    # Each configured archive in turn: the first lacks the file, the second has it.
    assert f"fetching file://{empty}/pool/main/s/simdjson/{TARBALL}" in proc.stdout
    assert f"fetching file://{tmp_path}/mirror/pool/main/s/simdjson/{TARBALL}" in proc.stdout
    assert os.listdir(deps) == [TARBALL] and (deps / TARBALL).read_bytes() == good


def test_setup_fetch_refuses_an_archive_file_with_another_hash(tmp_path):
    deps = tmp_path / "deps"
    proc = fetch(deps, apt_config=apt_sources(tmp_path, archive_with(tmp_path, "mirror", b"tampered")))
    assert proc.returncode == 0, proc.stderr
    assert "expected 156b1bc5" in said(proc) and "link the shared libsimdjson" in said(proc)
    assert not deps.exists() or os.listdir(deps) == []


def test_setup_fetch_without_an_apt_archive_says_so(tmp_path):
    deps = tmp_path / "deps"
    proc = fetch(deps, apt_config=apt_sources(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "apt lists no archive" in said(proc) and "link the shared libsimdjson" in said(proc)
    assert not deps.exists() or os.listdir(deps) == []

"""The CLI without --path remembers an interpreter's sys.path (and its
extension suffixes) in the cache directory instead of starting it every run
(src/cli/python_memo.cpp).  Each input the memo is keyed on is changed for
real here (a .pth file, PYTHONPATH, a venv on PATH, pyenv's version switches
through the real pyenv), and every answer is compared with what the
interpreter itself says, asked afresh.  Damaged and foreign memo files are
ignored and said under --verbose.  No timings are asserted."""

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
ASK = "import sys, json; print(json.dumps(sys.path))"


def settle():
    # Stamps from the clock tick of a change are not trusted ("racy"): let
    # the tick pass so that the next ask is remembered.
    time.sleep(0.03)


def base_env(cache):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYENV_", "EPLOAD_"))}
    env["EPLOAD_CACHE_DIR"] = str(cache)
    return env


def epload_paths(env, *args, cwd=None):
    """(sys.path as `epload index show` used it, its --verbose lines)."""
    p = subprocess.run([EPLOAD, "index", "show", "--json", "--verbose", *args], env=env, cwd=cwd,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["search_paths"], p.stderr


def truth(python, env, cwd=None):
    p = subprocess.run([python, "-c", ASK], env=env, cwd=cwd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def check(env, python="python3", cwd=None, expect=None):
    """epload's sys.path for `python` equals the interpreter's; returns
    whether it was remembered (True) or asked (False)."""
    args = [] if python == "python3" else ["--python", python]
    got, err = epload_paths(env, *args, cwd=cwd)
    assert got == truth(python, env, cwd), err
    remembered = "sys.path of" in err and "remembered" in err
    asked = "asked '" in err
    assert remembered != asked, err
    if expect is not None:
        assert remembered == (expect == "remembered"), err
    return remembered


@pytest.fixture()
def venv(tmp_path):
    v = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(v)], check=True)
    site = pathlib.Path(subprocess.run(
        [str(v / "bin" / "python3"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    settle()
    return v, site


def test_remembered_until_a_pth_file_comes_or_changes(tmp_path, venv):
    v, site = venv
    py = str(v / "bin" / "python3")
    env = base_env(tmp_path / "cache")
    check(env, py, expect="asked")
    check(env, py, expect="remembered")
    extra = tmp_path / "extra"
    extra.mkdir()
    (site / "extra.pth").write_text(f"# a comment\n{extra}\n")
    settle()
    check(env, py, expect="asked")
    assert str(extra) in epload_paths(env, "--python", py)[0]
    check(env, py, expect="remembered")
    # A .pth line naming a directory that does not exist adds nothing, until
    # the directory is created.
    later = tmp_path / "later"
    (site / "extra.pth").write_text(f"{extra}\n{later}\n")
    settle()
    check(env, py, expect="asked")
    check(env, py, expect="remembered")
    later.mkdir()
    settle()
    check(env, py, expect="asked")
    assert str(later) in epload_paths(env, "--python", py)[0]


def test_environment_variables_that_shape_sys_path(tmp_path, venv):
    v, _ = venv
    py = str(v / "bin" / "python3")
    env = base_env(tmp_path / "cache")
    check(env, py, expect="asked")
    for name, value in [("PYTHONPATH", str(tmp_path / "a")), ("PYTHONPATH", str(tmp_path / "b")),
                        ("PYTHONNOUSERSITE", "1"), ("PYTHONSAFEPATH", "1"),
                        ("PYTHONUSERBASE", str(tmp_path / "ub"))]:
        changed = dict(env, **{name: value})
        check(changed, py, expect="asked")
        check(changed, py, expect="remembered")
    check(env, py, expect="remembered")  # one memo per setting: the first is still there
    # A relative PYTHONPATH entry is made absolute against the current
    # directory: the memo is then valid for that directory only.
    rel = dict(env, PYTHONPATH="rel")
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    check(rel, py, cwd=tmp_path / "d1", expect="asked")
    check(rel, py, cwd=tmp_path / "d1", expect="remembered")
    check(rel, py, cwd=tmp_path / "d2", expect="asked")


def test_a_venv_on_path_is_another_interpreter(tmp_path, venv):
    v, _ = venv
    env = base_env(tmp_path / "cache")
    check(env, expect="asked")  # python3 as PATH finds it
    check(env, expect="remembered")
    inside = dict(env, PATH=f"{v / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(v))
    check(inside, expect="asked")
    assert any(p.startswith(str(v)) for p in epload_paths(inside)[0])
    check(inside, expect="remembered")
    check(env, expect="remembered")  # deactivated: the first interpreter's memo


def pyenv_root():
    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    shim = root / "shims" / "python3"
    if not shim.exists():
        pytest.skip(f"no pyenv here ({shim} does not exist)")
    versions = sorted(p.name for p in (root / "versions").iterdir()
                      if (p / "bin" / "python3").exists() and p.name.startswith("3."))
    if len(versions) < 2:
        pytest.skip(f"pyenv has fewer than two Python 3 versions installed: {versions}")
    return root, versions[-2:]


def test_pyenv_version_switches_are_seen(tmp_path):
    root, (a, b) = pyenv_root()
    env = base_env(tmp_path / "cache")
    env["PATH"] = f"{root / 'shims'}:{env['PATH']}"
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)

    def prefix_of(paths):
        hits = {v for v in (a, b) for p in paths if f"/versions/{v}/" in p}
        assert len(hits) == 1, paths
        return hits.pop()

    for version in (a, b, a):
        switched = dict(env, PYENV_VERSION=version)
        check(switched)
        check(switched, expect="remembered")
        assert prefix_of(epload_paths(switched)[0]) == version
    # .python-version in a parent of the current directory, as pyenv looks.
    (project / ".python-version").write_text(b + "\n")
    settle()
    check(env, cwd=project / "sub", expect="asked")
    assert prefix_of(epload_paths(env, cwd=project / "sub")[0]) == b
    check(env, cwd=project / "sub", expect="remembered")
    check(env, cwd=project, expect="remembered")  # the same version file applies
    (project / ".python-version").write_text(a + "\n")
    settle()
    check(env, cwd=project / "sub", expect="asked")
    assert prefix_of(epload_paths(env, cwd=project / "sub")[0]) == a
    # PYENV_VERSION wins over the file.
    check(dict(env, PYENV_VERSION=b), cwd=project / "sub")
    assert prefix_of(epload_paths(dict(env, PYENV_VERSION=b), cwd=project / "sub")[0]) == b


def memo_files(cache):
    return sorted(pathlib.Path(cache).glob("python-*.txt"))


def first_run(tmp_path, venv):
    """A first run, which asks the venv's interpreter and writes its memo:
    (environment, interpreter, cache directory, memo file)."""
    v, _ = venv
    py = str(v / "bin" / "python3")
    cache = tmp_path / "cache"
    env = base_env(cache)
    check(env, py, expect="asked")
    [memo] = memo_files(cache)
    return env, py, cache, memo


def test_damaged_or_foreign_memo_files_are_ignored_and_said(tmp_path, venv):
    env, py, cache, memo = first_run(tmp_path, venv)
    data = bytearray(memo.read_bytes())
    data[-5] ^= 0x20
    memo.write_bytes(bytes(data))
    _, err = epload_paths(env, "--python", py)
    assert "warning: ignored the remembered sys.path" in err and "corrupt" in err, err
    check(env, py, expect="remembered")  # asked again and rewritten
    memo.write_bytes(memo.read_bytes()[:40])
    _, err = epload_paths(env, "--python", py)
    assert "warning: ignored the remembered sys.path" in err, err
    # Writable by others: never trusted.
    check(env, py, expect="remembered")
    os.chmod(memo, 0o622)
    _, err = epload_paths(env, "--python", py)
    assert "warning: ignored the remembered sys.path" in err and "writable" in err, err
    check(env, py, expect="remembered")
    # Another interpreter's memo under this one's name: foreign.
    other = tmp_path / "cache2"
    check(base_env(other), expect="asked")
    [theirs] = memo_files(other)
    shutil.copyfile(theirs, memo)
    _, err = epload_paths(env, "--python", py)
    assert "a foreign file" in err, err
    check(env, py, expect="remembered")


def test_no_cache_asks_every_time_and_remembers_nothing(tmp_path, venv):
    v, _ = venv
    cache = tmp_path / "cache"
    env = base_env(cache)
    for _ in range(2):
        got, err = epload_paths(env, "--python", str(v / "bin" / "python3"), "--no-cache")
        assert "asked '" in err and got == truth(str(v / "bin" / "python3"), env)
    assert not memo_files(cache)


def test_a_wrapper_script_is_asked_every_run(tmp_path, venv):
    # A script may choose its interpreter by rules of its own: nothing it
    # says is remembered.
    v, _ = venv
    wrapper = tmp_path / "bin" / "mypython"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {v / 'bin' / 'python3'} \"$@\"\n")
    wrapper.chmod(0o755)
    env = base_env(tmp_path / "cache")
    for _ in range(2):
        check(env, str(wrapper), expect="asked")
    _, err = epload_paths(env, "--python", str(wrapper))
    assert "chooses the interpreter by rules of its own" in err, err


def test_an_interpreter_that_cannot_be_run_is_a_clear_error(tmp_path):
    env = base_env(tmp_path / "cache")
    p = subprocess.run([EPLOAD, "entry-points", "--python", "no-such-python-here"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "cannot run interpreter 'no-such-python-here'" in p.stderr, p.stderr


def test_backends_resolve_with_the_target_interpreters_suffixes(tmp_path):
    # A native backend named with one interpreter's extension suffix is found
    # for that interpreter and not for another whose suffixes differ.
    lib = BUILD_DIR / "tests" / "backends" / "tb_npu.so"
    assert lib.exists(), f"build the test backends first: {lib}"
    pythons = [PYTHON]
    root = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    pythons += sorted(str(p) for p in root.glob("versions/3.*/bin/python3"))
    suffix = {}
    for py in pythons:
        out = subprocess.run([py, "-c", "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            suffix.setdefault(out.stdout.strip(), py)
    if len(suffix) < 2:
        pytest.skip(f"needs two interpreters with different extension suffixes: {suffix}")
    (tag, mine), (_, other) = list(suffix.items())[:2]
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    shutil.copyfile(lib, site / "pkg" / f"mod{tag}")
    d = site / "tbnpu-1.0.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: tbnpu\nVersion: 1.0\n")
    (d / "entry_points.txt").write_text("[torch.backends]\nnpu = pkg.mod:tb_init\n")

    def backend(py):
        # A cache directory each: the learned store, keyed on the search
        # paths, would remember the other's resolution.
        env = base_env(tmp_path / f"cache-{hash(py)}")
        p = subprocess.run([EPLOAD, "devices", "--json", "--path", str(site), "--python", py],
                           env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        [b] = json.loads(p.stdout)["backends"]
        return b

    assert backend(mine)["kind"] == "native"
    assert backend(mine)["library"] == str(site / "pkg" / f"mod{tag}")
    theirs = backend(other)
    assert theirs["kind"] != "native" and f"mod{tag}" not in (theirs["library"] or ""), theirs


def test_memo_files_are_pruned_and_cleared_with_the_cache(tmp_path, venv):
    """The memo files are the CLI's (it registers their names, kept_files.hpp):
    an index write prunes one unused for 30 days and an abandoned temporary
    file, and `epload index clear` removes them; other files stay, those
    named like memos but not written by epload too."""
    env, py, cache, memo = first_run(tmp_path, venv)
    now = time.time()
    old = cache / "python-0123456789abcdef.txt"
    old.write_text("epload-python 1\n0123456789abcdef\nan old memo")
    os.utime(old, (now - 31 * 86400, now - 31 * 86400))
    killed = cache / ".python-0123456789abcdef.txt.tmp.AbC123"
    killed.write_text("epload-pyt")  # a killed writer's
    os.utime(killed, (now - 7200, now - 7200))
    (cache / "notes.txt").write_text("not ours")
    theirs = cache / "python-requirements.txt"
    theirs.write_text("requests==2.31\n")
    os.utime(theirs, (now - 400 * 86400, now - 400 * 86400))
    site = tmp_path / "site"
    site.mkdir()
    p = subprocess.run([EPLOAD, "index", "build", "--path", str(site)], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert memo_files(cache) == sorted([memo, theirs])
    assert not killed.exists()
    assert theirs.read_text() == "requests==2.31\n"
    p = subprocess.run([EPLOAD, "index", "clear", "--path", str(site)], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert sorted(n.name for n in cache.iterdir()) == ["notes.txt", "python-requirements.txt"]

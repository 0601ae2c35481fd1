"""`epload index clear`: removes epload's files only, reports what it removed,
and on a cache directory that does not exist creates nothing and starts no
interpreter (it needs none).  The default directory, named after epload, goes
too once empty; one given by --cache-dir or EPLOAD_CACHE_DIR may be shared
and stays."""

import os
import pathlib
import subprocess
import sys

BUILD = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build"))
EPLOAD = str(BUILD / "epload")


def clean_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def spy_python(tmp_path):
    """An interpreter that leaves a mark when it is started."""
    mark = tmp_path / "python-was-run"
    spy = tmp_path / "spy-python"
    spy.write_text(f"#!/bin/sh\ntouch '{mark}'\nexec '{sys.executable}' \"$@\"\n")
    spy.chmod(0o755)
    return spy, mark


def clear(env, *args):
    return subprocess.run([EPLOAD, "index", "clear", *args], env=env, capture_output=True, text=True)


def test_a_missing_directory_is_not_created_and_no_interpreter_runs(tmp_path):
    spy, mark = spy_python(tmp_path)
    missing = tmp_path / "no-cache-here"
    p = clear(clean_env(tmp_path), "--cache-dir", str(missing), "--python", str(spy))
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"no cache directory {missing}: nothing to remove\n"
    assert not missing.exists()
    assert not mark.exists()
    # The default directory alike (with the default interpreter on PATH).
    env = clean_env(tmp_path, PATH=f"{tmp_path}:{os.environ.get('PATH', '')}")
    os.symlink(spy, tmp_path / "python3")
    p = clear(env)
    assert p.returncode == 0, p.stderr
    default = tmp_path / "home" / ".cache" / "epload"
    assert p.stdout == f"no cache directory {default}: nothing to remove\n"
    assert not (tmp_path / "home").exists()
    assert not mark.exists()


def build(env, site, *args):
    p = subprocess.run([EPLOAD, "index", "build", "--path", str(site), *args], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_it_reports_the_files_that_existed_and_removes_the_default_directory(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    env = clean_env(tmp_path)
    build(env, site)
    default = tmp_path / "home" / ".cache" / "epload"
    assert len(os.listdir(default)) == 1
    p = clear(env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"removed 1 cache file(s) from {default}, and the directory\n"
    assert not default.exists()
    # A file of someone else's keeps it.
    build(env, site)
    (default / "notes.txt").write_text("mine\n")
    p = clear(env)
    assert p.stdout == f"removed 1 cache file(s) from {default}\n"
    assert os.listdir(default) == ["notes.txt"]


def test_a_directory_named_by_the_user_stays(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for how in ("option", "variable"):
        mine = tmp_path / f"cache-{how}"
        env = clean_env(tmp_path, **({"EPLOAD_CACHE_DIR": str(mine)} if how == "variable" else {}))
        args = ("--cache-dir", str(mine)) if how == "option" else ()
        build(env, site, *args)
        p = clear(env, *args)
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"removed 1 cache file(s) from {mine}\n"
        assert mine.is_dir() and os.listdir(mine) == []

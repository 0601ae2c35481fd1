"""Without --python the command inspects its own environment, as a console
script does: the `python` beside the `epload` executable (where pip puts it
in a venv), found from the executable's real location, whether or not the
venv is activated; else the `python3` first on PATH.  --verbose names the
interpreter chosen and why."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = BUILD_DIR / "epload"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
ASK = "import sys, json; print(json.dumps(sys.path))"


def clean_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "EPLOAD_", "VIRTUAL_ENV"))}
    env["EPLOAD_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def sys_path(python, env, cwd):
    p = subprocess.run([str(python), "-c", ASK], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def show(command, env, cwd):
    """(the search paths `index show` used, its --verbose lines)."""
    p = subprocess.run([str(command), "index", "show", "--json", "--verbose"], env=env, cwd=cwd,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["search_paths"], p.stderr


@pytest.fixture()
def venv(tmp_path):
    """A venv (its bin/python a symlink, as venv makes it) with the command
    installed in its bin/ as pip installs it, and one distribution of its own."""
    v = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(v)], check=True)
    assert (v / "bin" / "python").is_symlink()
    shutil.copy2(EPLOAD, v / "bin" / "epload")
    site = pathlib.Path(subprocess.run(
        [str(v / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    info = site / "venv_only-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: venv-only\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nvenv-only = venv_only:main\n")
    return v


def test_a_venvs_command_run_by_path_inspects_the_venv_not_python3_on_path(venv, tmp_path):
    env = clean_env(tmp_path)
    assert str(venv) not in env["PATH"]
    paths, err = show(venv / "bin" / "epload", env, tmp_path)
    assert paths == sys_path(venv / "bin" / "python", env, tmp_path)
    assert paths != sys_path("python3", env, tmp_path)
    assert f"epload: interpreter {venv}/bin/python (the interpreter beside this command)\n" in err, err
    p = subprocess.run([str(venv / "bin" / "epload"), "entry-points", "--group", "console_scripts", "--json"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ["venv-only", "venv_only:main"] in [[e["name"], e["value"]] for e in json.loads(p.stdout)]


def test_a_symlink_to_the_command_leads_to_its_environment(venv, tmp_path):
    env = clean_env(tmp_path)
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    (elsewhere / "epload").symlink_to(venv / "bin" / "epload")
    paths, err = show(elsewhere / "epload", env, tmp_path)
    assert paths == sys_path(venv / "bin" / "python", env, tmp_path)
    assert f"interpreter {venv}/bin/python " in err, err


def test_an_explicit_python_wins(venv, tmp_path):
    env = clean_env(tmp_path)
    p = subprocess.run([str(venv / "bin" / "epload"), "index", "show", "--json", "--verbose", "--python", PYTHON],
                       env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(p.stdout)["search_paths"] == sys_path(PYTHON, env, tmp_path)
    assert f"epload: interpreter {PYTHON} (--python)\n" in p.stderr, p.stderr


def test_without_a_python_beside_it_the_command_asks_python3_on_path(tmp_path):
    env = clean_env(tmp_path)
    paths, err = show(EPLOAD, env, tmp_path)
    assert paths == sys_path("python3", env, tmp_path)
    assert f"epload: interpreter python3 (python3 on PATH; none beside this command in {os.path.realpath(BUILD_DIR)})\n" in err, err

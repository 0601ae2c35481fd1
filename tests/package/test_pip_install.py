"""`pip install <checkout>` into a fresh virtual environment of each
interpreter on the machine (pkgenv.interpreters()): the package imports and
says its version, the `epload` command is on the venv's PATH and answers as
importlib does, the .pth hook is active in a fresh interpreter of the venv,
and `pip uninstall` leaves no file behind.  The build writes nothing into the
checkout."""

import json
import os

import pytest

from pkgenv import (SOURCE_DIR, clean_env, fresh_venv, interpreters, pip_install_checkout,
                    project_version, run, slug, source_tree, tree)

INTERPRETERS = interpreters()

PROBE = r'''
import importlib.machinery, importlib.metadata, json, os, sys, sysconfig
import epload, epload._native
print(json.dumps({
    "version": importlib.metadata.version("epload"),
    "module_version": epload.__version__,
    "package": os.path.dirname(epload.__file__),
    "native": epload._native.__file__,
    "suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
    "purelib": sysconfig.get_paths()["purelib"],
    "platlib": sysconfig.get_paths()["platlib"],
    "scripts": sysconfig.get_paths()["scripts"],
}))
'''

HOOK_PROBE = r'''
import json, sys
print(json.dumps({"epload": "epload" in sys.modules,
                  "finders": [type(f).__module__ for f in sys.meta_path]}))
'''

ORACLE = r'''
import importlib.metadata, json
print(json.dumps(sorted([ep.name, ep.value] for ep in importlib.metadata.entry_points(group="console_scripts"))))
'''


@pytest.fixture(scope="module", params=INTERPRETERS, ids=slug)
def installed(request):
    """A fresh venv of the interpreter, the checkout pip-installed into it;
    the venv's file list from before the install."""
    f = request.param
    venv = fresh_venv(f, "venv")
    before = tree(venv)
    sources = source_tree()
    proc = pip_install_checkout(venv / "bin" / "python", f)
    assert "Successfully installed epload-" in proc.stdout, proc.stdout
    assert source_tree() == sources, "the build wrote into the checkout"
    return f, venv, before


def test_there_are_interpreters_to_install_into():
    assert INTERPRETERS, "no CPython interpreter found ($EPLOAD_PYTHON, python3 on PATH)"


def test_the_package_imports_with_its_version_and_extension(installed):
    f, venv, _ = installed
    out = json.loads(run([venv / "bin" / "python", "-c", PROBE], cwd="/").stdout)
    assert out["version"] == out["module_version"] == project_version()
    assert out["package"] == os.path.join(out["platlib"], "epload")
    # Built for this interpreter: its own extension suffix, not another's.
    assert out["native"] == os.path.join(out["package"], "_native" + out["suffix"])
    assert os.path.isfile(os.path.join(out["purelib"], "epload-autoload.pth"))
    assert os.path.isfile(os.path.join(out["scripts"], "epload"))


LICENCE_PROBE = r'''
import importlib.metadata, json
d = importlib.metadata.distribution("epload")
print(json.dumps({"expression": d.metadata["License-Expression"],
                  "files": {str(p): p.read_text() for p in d.files if "/licenses/" in str(p)}}))
'''


def test_the_installed_package_carries_its_licence_and_the_notices(installed):
    """LICENSE and licenses/* (the licences of what the build links in) in
    the installed .dist-info, byte for byte, and the licence in the
    metadata importlib.metadata reads."""
    _, venv, _ = installed
    out = json.loads(run([venv / "bin" / "python", "-c", LICENCE_PROBE], cwd="/").stdout)
    assert out["expression"] == "MIT"
    info = f"epload-{project_version()}.dist-info/licenses"
    want = {f"{info}/LICENSE": (SOURCE_DIR / "LICENSE").read_text()}
    want.update({f"{info}/licenses/{p.name}": p.read_text() for p in (SOURCE_DIR / "licenses").iterdir()})
    assert out["files"] == want
    assert "simdjson" in want[f"{info}/licenses/README"]


def test_the_command_is_on_the_venvs_path_and_answers_as_importlib(installed, tmp_path):
    _, venv, _ = installed
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                    EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    proc = run(["epload", "--version"], env=env)
    assert proc.stdout.startswith(f"epload {project_version()}"), proc.stdout
    # No --path: the search paths are those of the python beside the command, the venv's.
    proc = run(["epload", "entry-points", "--group", "console_scripts", "--json"], env=env, cwd=tmp_path)
    got = sorted([ep["name"], ep["value"]] for ep in json.loads(proc.stdout))
    want = json.loads(run([venv / "bin" / "python", "-c", ORACLE], cwd=tmp_path).stdout)
    assert got == want and ["pip", "pip._internal.cli.main:main"] in got


def test_the_pth_hook_is_active_in_a_fresh_interpreter(installed, tmp_path):
    _, venv, _ = installed
    python = venv / "bin" / "python"
    off = json.loads(run([python, "-c", HOOK_PROBE], cwd=tmp_path).stdout)
    assert off["epload"] is False  # without the variable the .pth line imports nothing
    env = clean_env(EPLOAD_AUTOLOAD_HOSTS="some_host", EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    on = json.loads(run([python, "-c", HOOK_PROBE], env=env, cwd=tmp_path).stdout)
    assert on["epload"] is True
    assert on["finders"][0].startswith("epload"), on["finders"]  # the host finder is first


def test_uninstall_leaves_no_file_behind(installed):
    _, venv, before = installed
    run([venv / "bin" / "python", "-m", "pip", "uninstall", "-y", "epload"])
    after = tree(venv)
    assert after == before, {"left": sorted(after - before), "lost": sorted(before - after)}

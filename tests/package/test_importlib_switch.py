"""`EPLOAD_IMPORTLIB=1` in a fresh virtual environment of each release wheel
(package.wheels builds them; by hand all four, CPython 3.10-3.13:
scripts/wheels.sh, then EPLOAD_WHEELS_DIR=dist): importlib.metadata.entry_points
is epload's in every process, with no code change, and answers as
importlib's own; off (and free of epload) without the variable; a bad value
warns and leaves it off; the hook's uninstall() gives importlib its function
back; and CPython's own importlib.metadata tests pass with the switch set."""

import json
import pathlib

import pytest

from pkgenv import (SOURCE_DIR, clean_env, facts, fresh_venv, release_wheels, run, skip_unless_it_runs_here,
                    wheel_python)

WHEELS = release_wheels()

PROBE = r'''
import json, sys
before = "epload" in sys.modules
import importlib.metadata as md
out = {"epload_at_start": before, "native_before_call": "epload._native" in sys.modules,
       "module": md.entry_points.__module__}
eps = md.entry_points(group="console_scripts")
out["native_after_call"] = "epload._native" in sys.modules
out["type"] = type(eps).__name__
out["answer"] = [[ep.name, ep.value, ep.group, ep.dist.name] for ep in eps]
try:
    md.entry_points(group="console_scripts", nonsense=1)
except Exception as e:
    out["error"] = [type(e).__name__, str(e)]
else:
    out["error"] = None
if "--uninstall" in sys.argv:
    from epload import _hook
    _hook.uninstall()
    out["after_uninstall"] = md.entry_points.__module__
    out["finders"] = [type(f).__module__ for f in sys.meta_path]
print(json.dumps(out))
'''


@pytest.fixture(scope="module", params=WHEELS, ids=lambda w: w.name)
def venv(request):
    """A fresh venv of the wheel's interpreter with the wheel alone installed."""
    wheel = request.param
    skip_unless_it_runs_here(wheel)
    f = facts(wheel_python(wheel))
    root = fresh_venv(f, "importlib-venv")
    run([root / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel])
    return f, root


def probe(venv, tmp_path, *args, **env):
    f, root = venv
    proc = run([root / "bin" / "python", "-c", PROBE, *args], cwd=tmp_path,
               env=clean_env(EPLOAD_CACHE_DIR=str(tmp_path / "cache"), **env))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["stderr"] = proc.stderr
    return out


def test_there_are_wheels_to_install():
    assert WHEELS, "no release wheels: run scripts/wheels.sh (or ctest -R package.wheels)"


def test_the_switch_makes_importlib_answer_from_epload(venv, tmp_path):
    off = probe(venv, tmp_path)
    assert off["module"] == "importlib.metadata" and off["epload_at_start"] is False
    on = probe(venv, tmp_path, EPLOAD_IMPORTLIB="1")
    assert on["module"] == "epload._entry_points"
    # Nothing native is loaded before the first call: processes that never
    # ask for entry points pay for the pure-Python hook only.
    assert on["native_before_call"] is False and on["native_after_call"] is True
    assert (on["type"], on["answer"], on["error"]) == (off["type"], off["answer"], off["error"])
    assert ["pip", "pip._internal.cli.main:main", "console_scripts", "pip"] in on["answer"]
    again = probe(venv, tmp_path, EPLOAD_IMPORTLIB="1", EPLOAD_DEBUG="1")
    assert again["answer"] == off["answer"]
    assert "index hit" in again["stderr"], again["stderr"]  # answered from epload's index


def test_zero_is_off_and_a_bad_value_warns(venv, tmp_path):
    zero = probe(venv, tmp_path, EPLOAD_IMPORTLIB="0")
    assert zero["module"] == "importlib.metadata" and zero["epload_at_start"] is False
    bad = probe(venv, tmp_path, EPLOAD_IMPORTLIB="yes")
    assert bad["module"] == "importlib.metadata"
    assert "RuntimeWarning: EPLOAD_IMPORTLIB='yes' is not one of 0, 1: using 0" in bad["stderr"], \
        bad["stderr"]


def test_uninstall_gives_importlib_its_own_function_back(venv, tmp_path):
    out = probe(venv, tmp_path, "--uninstall", EPLOAD_IMPORTLIB="1")
    assert out["module"] == "epload._entry_points"
    assert out["after_uninstall"] == "importlib.metadata"
    assert not [m for m in out["finders"] if m.startswith("epload")], out["finders"]


def test_cpython_importlib_metadata_suite_passes_with_the_switch_set(venv, tmp_path):
    f, root = venv
    suite = pathlib.Path(SOURCE_DIR) / "tests" / "py" / "cpython_metadata_suite.py"
    proc = run([root / "bin" / "python", suite, "--from-env"], cwd=tmp_path, timeout=900,
               env=clean_env(EPLOAD_IMPORTLIB="1", EPLOAD_CACHE_DIR=str(tmp_path / "cache")))
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not report["failures"], "\n\n".join(report["failures"])[-8000:]
    assert report["from_env"] and report["still_patched"], report
    assert report["modules"] and report["run"] >= 50, report
    # epload answered calls from its index and handed others (zips, other
    # finders) back to importlib's original without recursing.
    assert report["counts"]["answered"] > 0 and report["counts"]["handed_back"] > 0, report
    print(f"Python {report['python'].split()[0]}: {report['run']} tests "
          f"({report['skipped']} skipped), {report['counts']}")

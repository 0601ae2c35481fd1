"""`EPLOAD_IMPORTLIB=1` in a fresh virtual environment of each release wheel
(package.wheels builds them; by hand all four, CPython 3.10-3.13:
scripts/wheels.sh, then EPLOAD_WHEELS_DIR=dist): importlib.metadata.entry_points
is epload's in every process, with no code change, and answers as
importlib's own; off (and free of epload) without the variable; a bad value
warns and leaves it off; the hook's uninstall() gives importlib its function
back; and CPython's own importlib.metadata tests pass with the switch set."""

import json
import pathlib
import re

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
out["walk_module"] = md.distributions.__module__
out["walk"] = [[str(d._path), type(d).__name__, [[e.name, e.value, e.group, e.dist is d] for e in d.entry_points]]
               for d in md.distributions()]
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
    # The walk plugin hosts make (pluggy, flake8): epload's, importlib's answer.
    assert off["walk_module"] == "importlib.metadata" and on["walk_module"] == "epload._distributions"
    assert on["walk"] == off["walk"] and any(row[2] for row in on["walk"])
    assert ["pip", "pip._internal.cli.main:main", "console_scripts", "pip"] in on["answer"]
    again = probe(venv, tmp_path, EPLOAD_IMPORTLIB="1", EPLOAD_DEBUG="1")
    assert again["answer"] == off["answer"]
    assert "index hit" in again["stderr"], again["stderr"]  # answered from epload's index


def test_zero_is_off_and_a_bad_value_warns(venv, tmp_path):
    zero = probe(venv, tmp_path, EPLOAD_IMPORTLIB="0")
    assert zero["module"] == "importlib.metadata" and zero["epload_at_start"] is False
    bad = probe(venv, tmp_path, EPLOAD_IMPORTLIB="maybe")
    assert bad["module"] == "importlib.metadata"
    assert ("RuntimeWarning: EPLOAD_IMPORTLIB='maybe' is not one of 1, true, yes, on, 0, false, no, off: "
            "using 0") in bad["stderr"], bad["stderr"]


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
    assert report["walks"]["answered"] > 0 and report["walks"]["handed_back"] > 0, report
    print(f"Python {report['python'].split()[0]}: {report['run']} tests "
          f"({report['skipped']} skipped), {report['counts']}, walks {report['walks']}")


# Runs the probe's question in an isolated subinterpreter (Python 3.12+),
# where an extension module with per-process state cannot load: the switch
# must hand the call to importlib there, not raise ImportError.
SUBINTERPRETER = r'''
import json, sys
try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12
out = sys.argv[1]
code = f"""
import importlib.metadata as md, json, sys
try:
    answer = [[ep.name, ep.value, ep.group] for ep in md.entry_points(group="console_scripts")]
    error = None
except BaseException as e:
    answer, error = None, [type(e).__name__, str(e)]
with open({out!r}, "w") as f:
    json.dump({{"module": md.entry_points.__module__, "answer": answer, "error": error,
               "native": "epload._native" in sys.modules}}, f)
"""
interp = interpreters.create()
interpreters.run_string(interp, code)
interpreters.destroy(interp)
import importlib.metadata as md
print(json.dumps({"main": [[ep.name, ep.value, ep.group] for ep in md.entry_points(group="console_scripts")],
                  "sub": json.load(open(out))}))
'''


@pytest.mark.parametrize("wheel", [w for w in WHEELS if int(re.search(r"-cp3(\d+)-", w.name).group(1)) >= 12],
                         ids=lambda w: w.name)
def test_an_isolated_subinterpreter_gets_importlibs_answer(wheel, tmp_path):
    skip_unless_it_runs_here(wheel)
    f = facts(wheel_python(wheel))
    root = fresh_venv(f, "subinterpreter-venv")
    # The interpreter alone first: CPython 3.12.1 aborts here by itself (a
    # double free in _datetime's init, imported in the subinterpreter and
    # then in the main one), with nothing of epload installed.
    alone = run([root / "bin" / "python", "-c", SUBINTERPRETER, tmp_path / "alone.json"], cwd=tmp_path,
                check=False)
    if alone.returncode != 0:
        pytest.skip(f"{f['executable']} fails this without epload (exit {alone.returncode}): "
                    f"{alone.stderr.strip()[-300:]}")
    run([root / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel])
    proc = run([root / "bin" / "python", "-c", SUBINTERPRETER, tmp_path / "sub.json"], cwd=tmp_path,
               env=clean_env(EPLOAD_IMPORTLIB="1", EPLOAD_DEBUG="1",
                             EPLOAD_CACHE_DIR=str(tmp_path / "cache")))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    sub = out["sub"]
    assert sub["error"] is None, sub
    assert sub["module"] == "epload._entry_points" and sub["native"] is False
    assert sub["answer"] == out["main"] and sub["answer"]
    assert "native module cannot load here" in proc.stderr, proc.stderr

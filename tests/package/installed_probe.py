"""What an installed epload must do, checked from inside the environment it is
installed in (run by that environment's python, with nothing of a checkout
on its path): used by tests/package/test_installed_wheels.py for each release
wheel and by scripts/wheel_bare_check.sh on a machine with nothing but Python.

    python installed_probe.py WORKDIR

Checks, each naming what it saw on failure:
  * `import epload` is the installed package, of the installed version;
  * the `epload` command beside the interpreter starts and answers
    `entry-points --group console_scripts` as importlib.metadata does;
  * epload.entry_points() answers as importlib.metadata.entry_points();
  * the .pth hook: off (epload not even imported) without
    EPLOAD_AUTOLOAD_HOSTS; with it, `import barehost` loads no backend, and the
    first use of the declared device loads the pure-Python backend, once.
The host and its backend are written into the environment's site-packages
and removed at the end.  Prints one JSON line; exits 1 on the first failure.
"""

import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

WORK = pathlib.Path(sys.argv[1])
SITE = pathlib.Path(sysconfig.get_paths()["purelib"])
BIN = pathlib.Path(sysconfig.get_paths()["scripts"])
CREATED = [SITE / "barehost", SITE / "bare_backend", SITE / "bare_backend-1.0.dist-info"]

HOST = '''
events = []  # what the backend did, in order
'''
BACKEND = '''
import types
import barehost
barehost.events.append("import")

def _autoload():
    barehost.events.append("init")
    barehost.baredev = types.ModuleType("bare_backend.baredev")
'''
ENTRY_POINTS = '''
[barehost.backends]
bare = bare_backend:_autoload

[epload.devices]
baredev = bare
'''
HOOK_PROBE = '''
import json, sys
import barehost
state = {"epload": "epload" in sys.modules, "at_import": list(barehost.events),
         "backend_imported": "bare_backend" in sys.modules}
state["device"] = barehost.baredev.__name__
barehost.baredev
state["after_use"] = list(barehost.events)
print(json.dumps(state))
'''
ORACLE = '''
import importlib.metadata, json
print(json.dumps(sorted([ep.name, ep.value] for ep in importlib.metadata.entry_points(group="console_scripts"))))
'''


def fail(what, seen):
    print(f"installed_probe: {what}\n  saw: {seen}", file=sys.stderr)
    raise SystemExit(1)


def run(argv, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "PYTHON"))}
    env.update(EPLOAD_CACHE_DIR=str(WORK / "cache"), **extra)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=WORK, timeout=300)
    if proc.returncode != 0:
        fail(f"{argv} exited {proc.returncode}", proc.stderr[-3000:])
    return proc.stdout


def write_backend():
    (SITE / "barehost").mkdir()
    (SITE / "barehost" / "__init__.py").write_text(HOST)
    (SITE / "bare_backend").mkdir()
    (SITE / "bare_backend" / "__init__.py").write_text(BACKEND)
    info = SITE / "bare_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bare_backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    import epload
    out = {"python": sys.version.split()[0], "epload": epload.__version__, "file": epload.__file__}
    if not epload.__file__.startswith(str(SITE)):
        fail(f"epload is not imported from {SITE}", epload.__file__)
    if epload.__version__ != importlib.metadata.version("epload"):
        fail("epload.__version__ differs from the installed distribution's", epload.__version__)

    exe = BIN / "epload"
    version = run([str(exe), "--version"])
    if not version.startswith(f"epload {epload.__version__}"):
        fail("`epload --version` names another version", version)
    out["command"] = version.strip()
    # No --path: the search paths are those of the python3 on PATH, this one.
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    rows = json.loads(run([str(exe), "entry-points", "--group", "console_scripts", "--json"], PATH=path))
    got = sorted([r["name"], r["value"]] for r in rows)
    want = json.loads(run([sys.executable, "-c", ORACLE]))
    if got != want:
        fail("`epload entry-points --group console_scripts` differs from importlib.metadata", [got, want])
    out["console_scripts"] = len(got)

    api = sorted((ep.name, ep.value) for ep in epload.entry_points(group="console_scripts"))
    oracle = sorted((ep.name, ep.value) for ep in importlib.metadata.entry_points(group="console_scripts"))
    if api != oracle or not api:
        fail("epload.entry_points(group='console_scripts') differs from importlib.metadata", [api, oracle])

    write_backend()
    try:
        off = run([sys.executable, "-c", "import sys, json; import barehost; print(json.dumps('epload' in sys.modules))"])
        if json.loads(off) is not False:
            fail("without EPLOAD_AUTOLOAD_HOSTS the .pth hook imported epload", off)
        on = json.loads(run([sys.executable, "-c", HOOK_PROBE], EPLOAD_AUTOLOAD_HOSTS="barehost=barehost.backends"))
        want_on = {"epload": True, "at_import": [], "backend_imported": False,
                   "device": "bare_backend.baredev", "after_use": ["import", "init"]}
        if on != want_on:
            fail("the .pth hook did not load the backend lazily, once", [on, want_on])
        out["hook"] = on
    finally:
        for p in CREATED:
            shutil.rmtree(p, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

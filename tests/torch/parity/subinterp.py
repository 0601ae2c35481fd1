"""Subinterpreters, where stock cannot be the oracle (torch cannot be
imported in one): with the hook on, ``entry_points(group="torch.backends")``
asked inside a subinterpreter must be importlib's answer, directly
(``epload.entry_points``) and through ``importlib.metadata`` with
``EPLOAD_IMPORTLIB=1`` (allowed.py, REQUIRED['subinterpreter']); the
process ends by itself.

Each CPython 3.10-3.13 of ``$(pyenv root)/versions`` gets a venv under the
build directory with epload installed from the checkout (a wheel per
interpreter and state of the sources, as scripts/torch_env.py makes them)."""

import glob
import json
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / 'scripts'))
import torch_env  # noqa: E402

VERSIONS = ('3.10', '3.11', '3.12', '3.13')

# argv: output file, mode ("direct" or "importlib").  The subinterpreter
# writes what it got; the main interpreter then what importlib gives it.
CHILD = r'''
import json, sys
try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.8-3.12
out, mode = sys.argv[1], sys.argv[2]
code = f"""
import json, sys
try:
    if {mode!r} == "direct":
        import epload
        eps = epload.entry_points(group="torch.backends")
    else:
        import importlib.metadata as md
        eps = md.entry_points(group="torch.backends")
    answer, error = sorted([ep.name, ep.value, ep.group] for ep in eps), None
except BaseException as e:
    answer, error = None, [type(e).__name__, str(e)]
with open({out!r}, "w") as f:
    json.dump({{"answer": answer, "error": error}}, f)
"""
interp = interpreters.create()
interpreters.run_string(interp, code)
interpreters.destroy(interp)
print("@@" + json.dumps(json.load(open(out))))
'''

# importlib's own answer, in a process without epload's switches.
ORACLE = r'''
import importlib.metadata as md, json
print("@@" + json.dumps({"answer": sorted([ep.name, ep.value, ep.group]
                                          for ep in md.entry_points(group="torch.backends")),
                         "error": None}))
'''


def pyenv_pythons():
    """{X.Y: python} for each CPython of VERSIONS under pyenv's versions."""
    root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    found = {}
    for python in sorted(glob.glob(os.path.join(root, 'versions', '*', 'bin', 'python3'))):
        m = re.match(r'(\d+\.\d+)\.', os.path.basename(os.path.dirname(os.path.dirname(python))))
        if m and m.group(1) in VERSIONS:
            found.setdefault(m.group(1), python)
    return found


def venv_with_epload(base, build, version):
    """A venv of ``base`` under the build directory with epload installed
    from the checkout (again when its sources changed); its python."""
    venv = pathlib.Path(build) / f'parity-venv-{version}'
    python = venv / 'bin' / 'python'
    stamp = venv / 'epload-installed.json'
    wanted = {'base': os.path.realpath(base), 'digest': torch_env.epload_digest()}
    if not torch_env.up_to_date(stamp, wanted):
        if not python.exists():
            subprocess.run([base, '-m', 'venv', str(venv)], check=True, capture_output=True)
        wheels = pathlib.Path(build) / f'parity-wheel-{version}'
        torch_env.install_epload(python, build, wheels=wheels)
        stamp.write_text(json.dumps(wanted) + '\n')
    return str(python)


def run(python, code, args, env, timeout=60):
    """(process, its last record); a process that hangs is killed and
    returned with returncode None."""
    try:
        proc = subprocess.run([python, '-c', code, *args], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or '')
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or '')
        proc = subprocess.CompletedProcess(e.cmd, None, out, err + f'\n(hung: killed after {timeout} s)')
    got = [json.loads(line[2:]) for line in proc.stdout.splitlines() if line.startswith('@@')]
    return proc, (got[-1] if got else None)

#!/usr/bin/env python3
"""torch_env.py — the venv with a real PyTorch that the torch.* tests (and the
real-torch benchmarks) run in: created once under the build directory and
reused, re-created when one of its inputs changes.

    scripts/torch_env.py [--build DIR]            create or check it; print what it is
    scripts/torch_env.py [--build DIR] --python   ... and print only the venv's python

Inputs: a CPython 3.11 (``/usr/bin/python3`` when it is 3.11, else
``python3.11`` on PATH; the version PyTorch 2.13.0's local wheel is built
for), ``torch==2.13.0`` (pinned exactly: an unpinned ``torch`` makes pip take a
CUDA build of several GB) and epload, installed from the checkout by pip (``install_epload()``), again
whenever a file it is built from changed.

When torch cannot be installed (offline, no wheel for this interpreter) this
exits with status 2 and a message saying so; ``EPLOAD_SKIP_TORCH=1`` is the
documented way to skip the torch.* tests then.  Nothing is skipped silently.
"""

import argparse
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

TORCH_PIN = 'torch==2.13.0'
# Bump when what the venv holds changes in a way the inputs below do not show.
ENV_VERSION = 1
SKIP_HINT = ('set EPLOAD_SKIP_TORCH=1 to skip the torch.* tests '
             '(they need PyTorch 2.13.0 for CPython 3.11)')

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent


class TorchEnvError(Exception):
    """The venv cannot be made; the message says why and how to skip."""


def _ask(python, code):
    """What ``python -c code`` prints, or None if it cannot run."""
    try:
        out = subprocess.run([python, '-I', '-c', code], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python311():
    """The CPython 3.11 the venv is made from: ``/usr/bin/python3`` when it
    says it is 3.11 (Debian 12), else ``python3.11`` on PATH."""
    probe = 'import sys, platform; print(platform.python_implementation(), *sys.version_info[:2])'
    candidates = ['/usr/bin/python3', shutil.which('python3.11')]
    for python in candidates:
        if python and _ask(python, probe) == 'CPython 3 11':
            return python
    raise TorchEnvError('no CPython 3.11 found (neither /usr/bin/python3 nor python3.11 on '
                        f'PATH is one); {SKIP_HINT}')


def venv_dir(build):
    return pathlib.Path(build) / 'torch-venv'


def venv_python(build):
    return venv_dir(build) / 'bin' / 'python'


def install_epload(python, build, source=SOURCE, wheels=None):
    """Installs epload from the checkout into the venv of ``python`` with pip,
    as a user does (``pip install <checkout>``), in two steps: pip builds a
    wheel of the checkout, kept under the build directory for the state of
    its inputs (epload_digest()) and the interpreter's version, then installs
    it.  Another venv of that version (a test's own, beside the torch venv)
    installs the same wheel: pip's isolated build environment is new at every
    build, and scikit-build-core then clears its tree, so each build compiles
    everything again (~3 min of CPU).  A lock makes installs that run at once
    take turns.  ``wheels``: where the wheels are kept (another directory
    keeps another interpreter's wheel apart from the torch venv's)."""
    build = pathlib.Path(build)
    tag = _ask(str(python), 'import sys; print("cp%d%d" % sys.version_info[:2])')
    skbuild = f'{wheels}-skbuild' if wheels else build / 'torch-venv-skbuild'
    wheels = pathlib.Path(wheels) if wheels else build / 'torch-venv-wheel'
    with open(f'{wheels}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = wheels / f'{tag}-{epload_digest(source)}'
        found = sorted(made.glob('epload-*.whl'))
        if not found:
            shutil.rmtree(wheels, ignore_errors=True)  # wheels of older states
            made.mkdir(parents=True)
            _pip(python, 'wheel', '--no-deps', '-w', str(made),
                 f'--config-settings=build-dir={skbuild}', str(source))
            found = sorted(made.glob('epload-*.whl'))
        _pip_install(python, '--no-deps', '--force-reinstall', *map(str, found))


# What an installed epload is built from: a change to any of these makes
# ensure() install it again.
_EPLOAD_INPUTS = ('CMakeLists.txt', 'pyproject.toml', 'cmake', 'include', 'src', 'python')


def epload_digest(source=SOURCE):
    """A digest of the files epload is built from (names, sizes, contents)."""
    h = hashlib.sha256()
    for top in _EPLOAD_INPUTS:
        root = pathlib.Path(source) / top
        files = [root] if root.is_file() else sorted(p for p in root.rglob('*')
                                                     if p.is_file() and '__pycache__' not in p.parts)
        for f in files:
            h.update(str(f.relative_to(source)).encode() + b'\0' + f.read_bytes() + b'\0')
    return h.hexdigest()


def inputs(base, build):
    """What the venv is made from; a venv whose stamp differs is made again."""
    version = _ask(base, 'import sys; print(sys.version)')
    return {'env_version': ENV_VERSION, 'base': os.path.realpath(base), 'base_version': version,
            'torch': TORCH_PIN}


def up_to_date(stamp, wanted):
    """True when the stamp file records exactly ``wanted``."""
    try:
        return json.loads(pathlib.Path(stamp).read_text()) == wanted
    except (OSError, ValueError):
        return False


def _pip_install(python, *args):
    _pip(python, 'install', *args)


def _pip(python, command, *args):
    cmd = [str(python), '-m', 'pip', command, '--no-input', '--disable-pip-version-check',
           *args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        tail = '\n'.join((out.stdout + out.stderr).strip().splitlines()[-8:])
        raise TorchEnvError(f'cannot {command} {" ".join(args)} with the venv of {python}:\n'
                            f'{tail}\n{SKIP_HINT}')


def ensure(build, log=None):
    """The venv's python, after creating the venv if it is missing or was
    made from other inputs.  Safe to call from concurrent processes (a lock
    file beside the venv).  Raises TorchEnvError."""
    build = pathlib.Path(build).resolve()
    venv = venv_dir(build)
    python = venv_python(build)
    stamp = venv / 'epload-torch-env.json'
    build.mkdir(parents=True, exist_ok=True)
    with open(build / 'torch-venv.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = find_python311()
        wanted = inputs(base, build)
        epload_stamp = venv / 'epload-installed.json'
        epload_wanted = {'source': str(SOURCE), 'digest': epload_digest()}
        if up_to_date(stamp, wanted) and _ask(str(python), 'import torch; print(torch.__version__)'):
            if not up_to_date(epload_stamp, epload_wanted):
                if log:
                    log(f'installing epload from {SOURCE} into {venv} (pip)')
                install_epload(python, build)
                epload_stamp.write_text(json.dumps(epload_wanted) + '\n')
            return python
        if log:
            log(f'creating {venv} from {base} with {TORCH_PIN} (once; reused after)')
        shutil.rmtree(venv, ignore_errors=True)
        made = subprocess.run([base, '-m', 'venv', str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            raise TorchEnvError(f'{base} -m venv {venv} failed: {made.stderr.strip()}\n'
                                f'{SKIP_HINT}')
        _pip_install(python, TORCH_PIN)
        install_epload(python, build)
        got = _ask(str(python), 'import torch, epload._native; print(torch.__version__)')
        if not got or not got.startswith('2.13.0'):
            raise TorchEnvError(f'the venv {venv} cannot import torch 2.13.0 and epload '
                                f'(got {got!r}); {SKIP_HINT}')
        stamp.write_text(json.dumps(wanted, indent=1, sort_keys=True) + '\n')
        epload_stamp.write_text(json.dumps(epload_wanted) + '\n')
        return python


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--build', default=os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'),
                        help='build directory (default: $EPLOAD_BUILD_DIR or build/)')
    parser.add_argument('--python', action='store_true', help="print only the venv's python")
    args = parser.parse_args(argv)

    def log(message):
        print(f'torch_env: {message}', file=sys.stderr, flush=True)

    if os.environ.get('EPLOAD_SKIP_TORCH') == '1' and not args.python:
        print('EPLOAD_SKIP_TORCH=1: skipped the real-torch venv (and the torch.* tests)')
        return 0
    try:
        python = ensure(args.build, log)
    except TorchEnvError as err:
        print(f'torch_env: error: {err}', file=sys.stderr)
        return 2
    if args.python:
        print(python)
    else:
        version = _ask(str(python), 'import torch; print(torch.__version__)')
        print(f'{python} (torch {version})')
    return 0


if __name__ == '__main__':
    sys.exit(main())

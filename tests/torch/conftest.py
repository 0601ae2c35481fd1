"""The real-torch layer (torch.*): every test runs fresh processes of the
venv made by scripts/torch_env.py (CPython 3.11, torch 2.13.0, epload and its
.pth hook), with the fixture backends of tests/torch/backends that it
chooses, each copied into its own directory on PYTHONPATH (a real site
directory: the package and its dist-info).

EPLOAD_SKIP_TORCH=1 skips the layer (reported as skipped, never silently);
without it, a venv that cannot be made fails every test with the reason."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
BACKENDS = HERE / 'backends'
sys.path.insert(0, str(SOURCE / 'scripts'))

import torch_env  # noqa: E402

SKIP_MESSAGE = 'EPLOAD_SKIP_TORCH=1: skipped the real-torch tests'


@pytest.fixture(scope='session')
def torch_python():
    if os.environ.get('EPLOAD_SKIP_TORCH') == '1':
        pytest.skip(SKIP_MESSAGE)
    build = os.environ.get('EPLOAD_BUILD_DIR', str(SOURCE / 'build'))
    try:
        return str(torch_env.ensure(build, log=lambda m: print(m, file=sys.stderr)))
    except torch_env.TorchEnvError as err:
        pytest.fail(f'cannot make the torch venv: {err}', pytrace=False)


# Runs before the test's code in the child: `out(**values)` prints the
# answer as the last line; `events()` reads what the fixture backends logged.
PRELUDE = r'''
import json, os, sys
def events():
    try:
        with open(os.environ['EPLOAD_TORCH_FIXTURE_LOG']) as f:
            return [' '.join(line.split()[:2]) for line in f]
    except FileNotFoundError:
        return []
def count(event):
    return events().count(event)
def out(**values):
    print('@@' + json.dumps(values, default=repr))
def error(fn):
    try:
        fn()
    except BaseException as e:
        c = e.__cause__
        return {'type': type(e).__name__, 'message': str(e),
                'runtime': isinstance(e, RuntimeError), 'attribute': isinstance(e, AttributeError),
                'cause': None if c is None else [type(c).__name__, str(c)]}
    return None
'''


class Env:
    """A set of fixture backends, a cache directory and a log file; ``run``
    starts a fresh interpreter in it."""

    def __init__(self, python, root, backends):
        self.python = python
        self.root = pathlib.Path(root)
        self.cache = self.root / 'cache'
        self.dirs = []
        for name in backends:
            target = self.root / 'site' / name
            shutil.copytree(BACKENDS / name, target)
            self.dirs.append(target)
        self.runs = 0

    def path(self, name):
        return self.root / 'site' / name

    def environ(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON'))}
        env.update(PYTHONPATH=os.pathsep.join([str(BACKENDS / 'common')] + [str(d) for d in self.dirs]),
                   PYTHONDONTWRITEBYTECODE='1', EPLOAD_CACHE_DIR=str(self.cache),
                   EPLOAD_AUTOLOAD_HOSTS='torch', PYTHONWARNINGS='ignore::UserWarning')
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run(self, code, expect_ok=True, **extra):
        """Runs PRELUDE + code; returns the dict given to ``out``, plus
        ``events`` (the fixture log), ``returncode`` and ``stderr``."""
        self.runs += 1
        log = self.root / f'log-{self.runs}'
        env = self.environ(EPLOAD_TORCH_FIXTURE_LOG=str(log), **extra)
        proc = subprocess.run([self.python, '-c', PRELUDE + code], env=env,
                              capture_output=True, text=True, timeout=600)
        answer = {}
        for line in proc.stdout.splitlines():
            if line.startswith('@@'):
                answer = json.loads(line[2:])
        events = [' '.join(line.split()[:2]) for line in log.read_text().splitlines()] \
            if log.exists() else []
        answer.update(events=events, returncode=proc.returncode, stderr=proc.stderr)
        if expect_ok:
            assert proc.returncode == 0, f'child failed:\n{proc.stdout}\n{proc.stderr}'
        return answer

    def learn(self, **extra):
        """A first run: every backend loads at the end of import torch and
        its devices are learned."""
        return self.run('import torch\nout()', **extra)


@pytest.fixture
def make_env(torch_python, tmp_path):
    made = []

    def make(*backends):
        env = Env(torch_python, tmp_path / f'env{len(made)}', backends)
        made.append(env)
        return env
    return make

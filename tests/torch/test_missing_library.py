"""A backend that cannot load because a shared library it needs is missing
(backends/nolib: its import loads a real extension module linked against
libepload_nolib_dep.so, which is built and not shipped), beside a working
one (foo), in a real `import torch`.

Lazy: `import torch` succeeds with ONE warning that names the backend, the
cause and both ways to disable it, attributed to the user's `import torch`
line; `torch.<name>` for a name no loaded backend provides, `hasattr` and
`epload.device(name)` keep their contracts, the AttributeError names the
backend that failed and why; `epload devices` shows its last failure, which
never keeps a later process from trying again.  Eager: PyTorch's exact error
(compared with stock torch's)."""

import json
import os
import pathlib
import subprocess

import pytest

import nolib_build

BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', pathlib.Path(__file__).parents[2] / 'build'))
MISSING = 'libepload_nolib_dep.so: cannot open shared object file'


@pytest.fixture
def nolib_env(make_env, torch_python):
    env = make_env('foo', 'nolib')
    env.lib_dir = env.root / 'not-installed'
    nolib_build.build(torch_python, env.path('nolib'), env.lib_dir)
    return env


# The user's script: `import torch` on a line it knows, every warning kept.
IMPORT_TORCH = '''
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    line = sys._getframe().f_lineno + 1
    import torch
mine = [[w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught
        if 'nolib' in str(w.message)]
'''


def test_the_extension_is_real_and_needs_the_library(nolib_env):
    code = 'e = error(lambda: __import__("torch_nolib"))\nout(e=e)'
    missing = nolib_env.run(code, EPLOAD_AUTOLOAD_HOSTS=None)
    assert missing['e']['type'] == 'ImportError' and MISSING in missing['e']['message']
    present = nolib_env.run('import torch_nolib\nout(answer=torch_nolib._nolib.answer())',
                            EPLOAD_AUTOLOAD_HOSTS=None, LD_LIBRARY_PATH=str(nolib_env.lib_dir))
    assert present['answer'] == 42


def test_lazy_import_torch_succeeds_with_one_warning_at_the_users_line(nolib_env):
    for run in range(2):  # the second process tries it again: a failure is never a reason to skip
        got = nolib_env.run(IMPORT_TORCH + 'out(mine=mine, line=line)')
        assert len(got['mine']) == 1, got['mine']
        category, message, filename, lineno = got['mine'][0]
        assert category == 'RuntimeWarning'
        assert (filename, lineno) == ('<string>', got['line'])
        assert 'backend extension: nolib' in message and MISSING in message
        assert 'TORCH_DEVICE_BACKEND_AUTOLOAD=0' in message and 'EPLOAD_DISABLE=nolib' in message
        assert got['events'].count('nolib import') == 1, (run, got['events'])


def test_lookups_keep_their_contracts_and_say_which_backend_failed(nolib_env):
    got = nolib_env.run(IMPORT_TORCH + '''
import epload
def device():
    return epload.device('nosuch')
try:
    device()
    lookup = None
except Exception as e:
    lookup = isinstance(e, LookupError)
out(attr=error(lambda: torch.nosuch), has=hasattr(torch, 'nosuch'), device=error(device),
    lookup=lookup, dynamo=torch._dynamo.__name__, foo=torch.ones(2).to('foo').cpu().tolist())
''')
    attr = got['attr']
    # Both classes, as a failed backend's error: the name may be the failed backend's.
    assert attr['attribute'] and attr['runtime']
    assert attr['message'].startswith("module 'torch' has no attribute 'nosuch' (")
    assert "'nolib' (ImportError: " in attr['message'] and MISSING in attr['message']
    assert attr['cause'][0] == 'ImportError' and MISSING in attr['cause'][1]
    assert got['has'] is False
    assert got['lookup'] is True and got['device']['type'] == 'DeviceNotFoundError'
    assert 'nolib' in got['device']['message'] and MISSING in got['device']['message']
    # torch's own lazy attributes and the working backend are untouched.
    assert got['dynamo'] == 'torch._dynamo' and got['foo'] == [1.0, 1.0]


def test_epload_devices_shows_the_last_failure_and_its_cause(nolib_env):
    nolib_env.run('import torch\nout()')

    def listing():
        proc = subprocess.run([str(BUILD / 'epload'), 'devices', '--json', '--python', nolib_env.python],
                              env=nolib_env.environ(), cwd=str(nolib_env.root), capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        text = subprocess.run([str(BUILD / 'epload'), 'devices', '--python', nolib_env.python],
                              env=nolib_env.environ(), cwd=str(nolib_env.root), capture_output=True,
                              text=True).stdout
        return {b['backend']: b for b in json.loads(proc.stdout)['backends']}, text

    backends, text = listing()
    last = backends['nolib']['last_failure']
    assert last is not None and "backend 'nolib'" in last and MISSING in last
    assert backends['nolib']['state'] == 'unloaded'  # recorded for display: nothing is skipped
    assert backends['foo']['last_failure'] is None
    assert 'last failed load' in text and MISSING in text
    # Once the library is there, the next process loads it and the record goes.
    ok = nolib_env.run('import torch\nout(answer=torch.nolib_answer)',
                       LD_LIBRARY_PATH=str(nolib_env.lib_dir))
    assert ok['answer'] == 42
    backends, text = listing()
    assert backends['nolib']['last_failure'] is None and 'last failed load' not in text


def test_eager_is_pytorchs_exact_error(nolib_env):
    code = '''
try:
    import torch
    e = None
except BaseException as err:
    e = {'type': type(err).__name__, 'message': str(err),
         'cause': None if err.__cause__ is None else [type(err.__cause__).__name__, str(err.__cause__)]}
out(error=e)
'''
    stock = nolib_env.run(code, EPLOAD_AUTOLOAD_HOSTS=None)
    eager = nolib_env.run(code, EPLOAD_MODE='eager')
    assert eager['error'] == stock['error']
    assert stock['error']['type'] == 'RuntimeError'
    assert stock['error']['message'] == ('Failed to load the backend extension: nolib. You can disable '
                                         'extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.')
    assert stock['error']['cause'][0] == 'ImportError' and MISSING in stock['error']['cause'][1]

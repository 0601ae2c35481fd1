"""Loads that are interrupted or that fail halfway, in a real `import torch`,
against stock torch (its own loop, no hook) as the oracle.

Interrupted: a KeyboardInterrupt or SystemExit raised while a backend loads
(by the backend, or by a real SIGINT) propagates unchanged in every mode and
at every trigger, with stock's exit status and stderr; it is no failure of
the backend: nothing is recorded, and the next use loads it.

Failed halfway: a backend that registered its device and then failed is
never served: every later use raises its error, and what it set on torch
(``torch.flaky``, ``sys.modules["torch.flaky"]``) is gone.  Its PrivateUse1
name stays registered (PyTorch cannot undo it)."""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', pathlib.Path(__file__).parents[2] / 'build'))

STOCK = {'EPLOAD_AUTOLOAD_HOSTS': None}
EAGER = {'EPLOAD_MODE': 'eager'}
LAZY = {}

# What the user's program ran into, caught.
CAUGHT = '''
import epload_torch_fixture as fx
def caught(fn):
    try:
        fn()
    except BaseException as e:
        return [type(e).__name__, [str(a) for a in e.args], e is fx.RAISED,
                e.__cause__ is None and e.__context__ is None]
    return None
'''

TRIGGERS = {
    'attribute': 'torch.flaky',
    'hasattr': 'hasattr(torch, "flaky")',
    'getattr': 'getattr(torch, "flaky", None)',
    'get_device_module': 'torch.get_device_module("flaky")',
    'to': 'torch.ones(2).to("flaky")',
    'epload.device': '__import__("epload").device("flaky")',
    'epload.load': '__import__("epload").load("flaky")',
}


@pytest.fixture
def flaky(make_env):
    return make_env('flaky')


def undeclared(env):
    """The backend's devices unknown: lazy mode loads it in `import torch`."""
    eps = env.path('flaky') / 'torch_flaky-0.1.dist-info' / 'entry_points.txt'
    eps.write_text('[torch.backends]\nflaky = torch_flaky:_autoload\n')
    return env


def devices(env):
    proc = subprocess.run([str(BUILD / 'epload'), 'devices', '--json', '--python', env.python],
                          env=env.environ(), cwd=str(env.root), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {b['backend']: b for b in json.loads(proc.stdout)['backends']}


def last_line(stderr):
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else ''


def shape(got):
    """What a user sees of an uncaught exception: the exit status, whether
    there is a traceback, and its last line."""
    return got['returncode'], got['stderr'].startswith('Traceback'), last_line(got['stderr'])


@pytest.mark.parametrize('action', ['keyboard', 'exit:3', 'exit:flaky gave up', 'sigint'])
def test_a_base_exception_in_import_torch_is_stocks_in_every_mode(flaky, action):
    undeclared(flaky)
    stock = flaky.run('import torch', expect_ok=False, EPLOAD_TEST_FLAKY=action, **STOCK)
    assert stock['returncode'] != 0
    for mode in (EAGER, LAZY):
        got = flaky.run('import torch', expect_ok=False, EPLOAD_TEST_FLAKY=action, **mode)
        assert shape(got) == shape(stock), (mode, got['stderr'], stock['stderr'])
    if action != 'sigint':
        code = CAUGHT + 'out(e=caught(lambda: __import__("torch")))'
        stock = flaky.run(code, EPLOAD_TEST_FLAKY=action, **STOCK)
        assert stock['e'][2] is True and stock['e'][3] is True
        for mode in (EAGER, LAZY):
            assert flaky.run(code, EPLOAD_TEST_FLAKY=action, **mode)['e'] == stock['e'], mode


@pytest.mark.parametrize('trigger', sorted(TRIGGERS))
def test_an_interrupted_first_use_propagates_unchanged_and_the_backend_stays_loadable(flaky, trigger):
    got = flaky.run(CAUGHT + f'''
import torch, epload
first = caught(lambda: {TRIGGERS[trigger]})
b = [b for b in epload.backends() if b.name == 'flaky'][0]
between = [b.state, b.error, repr(b.cause)]
second = torch.ones(2).to('flaky').cpu().tolist()
out(first=first, between=between, second=second, after=b.state, module=torch.flaky.__name__)
''', EPLOAD_TEST_FLAKY='keyboard,ok')
    assert got['first'] == ['KeyboardInterrupt', ['flaky: interrupted'], True, True]
    assert got['between'] == ['unloaded', '', 'None']
    assert got['second'] == [1.0, 1.0] and got['after'] == 'ready'
    assert got['module'] == 'torch_flaky.runtime'
    assert got['events'].count('flaky import') == 2
    assert devices(flaky)['flaky']['last_failure'] is None


def test_an_interrupted_load_is_not_remembered_by_the_next_process(flaky):
    flaky.run(CAUGHT + 'import torch\nout(e=caught(lambda: torch.flaky))', EPLOAD_TEST_FLAKY='keyboard')
    listed = devices(flaky)['flaky']
    assert listed['last_failure'] is None and listed['state'] == 'unloaded'
    got = flaky.run('import torch\nout(t=torch.ones(2).to("flaky").cpu().tolist())')
    assert got['t'] == [1.0, 1.0]


@pytest.mark.parametrize('action', ['exit:5', 'exit:flaky gave up', 'sigint', 'keyboard'])
def test_an_uncaught_base_exception_at_first_use_exits_as_stock_import_torch(flaky, action):
    stock = flaky.run('import torch', expect_ok=False, EPLOAD_TEST_FLAKY=action, **STOCK)
    lazy = flaky.run('import torch\ntorch.ones(2).to("flaky")', expect_ok=False, EPLOAD_TEST_FLAKY=action)
    assert shape(lazy) == shape(stock), (lazy['stderr'], stock['stderr'])
    if action == 'exit:5':
        assert stock['returncode'] == 5 and stock['stderr'] == lazy['stderr'] == ''


def run_until_sleeping_then_sigint(env, code, **extra):
    """Starts `code`, waits until the backend sleeps in its import, sends
    SIGINT; the exit status and stderr."""
    where = env.root / f'sleep-{env.runs}'
    env.runs += 1
    where.mkdir()
    proc = subprocess.Popen([env.python, '-c', code], stderr=subprocess.PIPE, text=True,
                            env=env.environ(EPLOAD_TEST_FLAKY='sleep', EPLOAD_TEST_FLAKY_DIR=str(where),
                                            **extra))
    try:
        while not (where / 'sleeping').exists():
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {'returncode': proc.returncode, 'stderr': stderr}


def test_a_sigint_while_a_backend_sleeps_in_its_load_ends_the_process_as_stock(flaky):
    stock = run_until_sleeping_then_sigint(flaky, 'import torch', **STOCK)
    assert stock['returncode'] == -signal.SIGINT and last_line(stock['stderr']) == 'KeyboardInterrupt'
    assert shape(run_until_sleeping_then_sigint(flaky, 'import torch', **EAGER)) == shape(stock)
    lazy = run_until_sleeping_then_sigint(flaky, 'import torch\ntorch.flaky')
    assert shape(lazy) == shape(stock), lazy['stderr']
    undeclared(flaky)
    assert shape(run_until_sleeping_then_sigint(flaky, 'import torch')) == shape(stock)


# ---- failed halfway ------------------------------------------------------------

@pytest.mark.parametrize('action', ['halfway', 'attr'])
def test_a_backend_failing_after_it_registered_is_never_served(flaky, action):
    got = flaky.run(f'''
import torch
uses = {json.dumps(TRIGGERS)}
seen = {{name: [error(lambda: eval(code)) for _ in range(2)] for name, code in uses.items()}}
out(seen=seen, has=hasattr(torch, 'flaky'), value=repr(getattr(torch, 'flaky', None)),
    in_dict='flaky' in torch.__dict__, in_modules='torch.flaky' in sys.modules,
    name=torch._C._get_privateuse1_backend_name())
''', EPLOAD_TEST_FLAKY=action)
    seen = got['seen']
    missing = 'libflaky_driver.so: cannot open shared object file'
    for name, (first, second) in seen.items():
        assert first == second, (name, first, second)  # sticky
        if name in ('hasattr', 'getattr'):
            assert first is None, name
            continue
        assert first is not None, name
        assert 'flaky' in first['message'], (name, first)
    for name in ('attribute', 'to', 'epload.load', 'epload.device'):
        e = seen[name][0]
        assert e['runtime'], (name, e)
        assert e['cause'] == ['RuntimeError', missing + ': No such file or directory'], (name, e)
    assert seen['attribute'][0]['type'] == '_BackendAttributeError' and seen['attribute'][0]['attribute']
    assert got['has'] is False and got['value'] == 'None'
    assert got['in_dict'] is False and got['in_modules'] is False
    assert got['name'] == 'flaky'  # PyTorch cannot release it: an allowed difference
    assert got['events'].count('flaky import') == 1


def test_a_backend_failing_halfway_fails_eager_import_torch_as_stock(flaky):
    code = '''
e = error(lambda: __import__("torch"))
out(e=e)
'''
    stock = flaky.run(code, EPLOAD_TEST_FLAKY='halfway', **STOCK)
    eager = flaky.run(code, EPLOAD_TEST_FLAKY='halfway', **EAGER)
    assert eager['e'] == stock['e'] and stock['e']['type'] == 'RuntimeError'

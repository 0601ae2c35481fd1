"""Process shapes around a lazy load in a real `import torch`: two first
uses whose inits wait for each other, and fork() while another thread is
inside a backend's init.  Each run is a fresh interpreter; a hang is the
subprocess's timeout, a failure."""

import shutil

import pytest


# Two threads, each the first use of one half of the cycle: torch.cyca's
# init looks up torch.cycb and the other way round, both inits having met
# first (epload_gate.barrier).
CYCLE = r'''
import threading
import torch
import epload_gate
got = {}
def first_use(name):
    got[name] = getattr(torch, name).__name__
threads = [threading.Thread(target=first_use, args=(n,)) for n in ('cyca', 'cycb')]
for t in threads:
    t.start()
for t in threads:
    t.join()
out(got=got, seen=epload_gate.seen, after=[hasattr(torch, 'cyca'), hasattr(torch, 'cycb')])
'''


@pytest.mark.parametrize('iteration', range(3))
def test_two_first_uses_whose_inits_wait_for_each_other_do_not_deadlock(make_env, iteration):
    env = make_env('cycle')
    env.learn()  # both devices learned: the next runs load lazily, under the import locks
    for i in range(2):
        # The learned store as the first run left it, each time: while the
        # two inits run at once, each may learn the other's device too (a
        # documented approximation), and a next run would wait for one
        # backend in both threads.
        cache = env.root / f'cache{i}'
        shutil.copytree(env.cache, cache)
        got = env.run(CYCLE, EPLOAD_TEST_CYCLE='1', EPLOAD_CACHE_DIR=str(cache))
        assert got['got'] == {'cyca': 'torch_cyca', 'cycb': 'torch_cycb'}, got
        # One init at least got "not there yet" (False), as a backend's init
        # does for its own device; the other may have waited for it.
        assert sorted(got['seen']) == ['cyca', 'cycb'] and False in got['seen'].values(), got
        assert got['after'] == [True, True]
        assert got['events'].count('cyca import') == 1 and got['events'].count('cycb import') == 1


# Thread T makes the first use of torch.fwait, whose init waits; the main
# thread forks meanwhile.  The child uses the device: a clear error naming
# the backend, never a wait on the parent's thread (its alarm ends a hang).
FORK = r'''
import os, signal, threading, warnings
warnings.simplefilter('ignore', DeprecationWarning)  # 3.12+: fork() of a threaded process
import torch
import epload_gate
got = {}
t = threading.Thread(target=lambda: got.setdefault('parent', getattr(torch, 'fwait').__name__))
t.start()
epload_gate.started.wait()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.alarm(60)
    os.close(r)
    import importlib
    # The import lock of torch.fwait, which thread T took before its load,
    # is not waited for either (no such module, as in stock torch).
    answer = {'first': error(lambda: torch.fwait), 'again': error(lambda: torch.fwait),
              'hasattr': hasattr(torch, 'fwait'),
              'import': error(lambda: importlib.import_module('torch.fwait'))}
    os.write(w, json.dumps(answer).encode())
    os._exit(0)
os.close(w)
epload_gate.release.set()
t.join()
child = b''
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    child += chunk
_, status = os.waitpid(pid, 0)
out(parent=got, child=json.loads(child) if child else None, status=status)
'''


def test_fork_while_another_thread_loads_a_backend_fails_it_clearly_in_the_child(make_env):
    env = make_env('forkwait')
    env.learn()
    got = env.run(FORK, EPLOAD_TEST_FORK_WAIT='1')
    assert got['status'] == 0, got
    assert got['parent'] == {'parent': 'torch_forkwait'}
    first = got['child']['first']
    assert first['attribute'] and first['runtime'], first
    assert "'fwait'" in first['message'] and 'forked' in first['message'], first
    assert got['child']['again']['message'] == first['message']
    assert got['child']['hasattr'] is False
    assert got['child']['import']['type'] == 'ModuleNotFoundError', got['child']


# The same with a PrivateUse1 device, registered at `import torch` from what
# the first run learned: thread T's first tensor on it imports torch.fwpu
# (the import system holds its lock, epload's finder loads the backend); the
# child's first tensor imports it again.
FORK_PRIVATEUSE1 = r'''
import os, signal, threading, warnings
warnings.simplefilter('ignore', DeprecationWarning)  # 3.12+: fork() of a threaded process
import torch
import epload_gate
got = {}
t = threading.Thread(target=lambda: got.setdefault('parent', torch.ones(2).to('fwpu').cpu().tolist()))
t.start()
epload_gate.started.wait()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.alarm(60)
    os.close(r)
    answer = {'name': torch._C._get_privateuse1_backend_name(),
              'first': error(lambda: torch.ones(2).to('fwpu')),
              'again': error(lambda: torch.ones(2).to('fwpu'))}
    os.write(w, json.dumps(answer).encode())
    os._exit(0)
os.close(w)
epload_gate.release.set()
t.join()
child = b''
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    child += chunk
_, status = os.waitpid(pid, 0)
out(parent=got, child=json.loads(child) if child else None, status=status)
'''


def test_fork_while_another_thread_loads_a_privateuse1_backend_fails_it_clearly_in_the_child(make_env):
    env = make_env('forkwaitpu')
    env.learn()
    got = env.run(FORK_PRIVATEUSE1, EPLOAD_TEST_FORK_WAIT='1')
    assert got['status'] == 0, got
    assert got['parent'] == {'parent': [1.0, 1.0]}, got
    child = got['child']
    assert child['name'] == 'fwpu'
    first = child['first']
    assert first is not None and "'fwpu'" in first['message'] and 'forked' in first['message'], child
    assert child['again']['message'] == first['message'], child

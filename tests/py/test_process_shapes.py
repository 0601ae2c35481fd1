"""Process shapes around epload, each in a fresh interpreter whose hang is a
failure (the subprocess's timeout, a forked child's alarm):

* a query inside a subinterpreter gets importlib's answer;
* fork() (os.fork, multiprocessing's fork start method) while another thread
  is inside a backend's init: the child's use of the device is a clear
  error naming the backend, never a wait on a thread that is not there;
* two first uses whose inits look up each other's devices: one of them is
  "not there yet", neither waits for ever.

The same shapes in a real `import torch`: tests/torch/test_process_shapes.py;
subinterpreters of every installed CPython: tests/torch/test_parity.py.
"""

import json
import pathlib
import subprocess

import pytest

from pyfixtures import PYTHON, env_for, make_dist, make_host, run_json, write

HERE = pathlib.Path(__file__).resolve().parent


def subinterpreter_report(tmp_path, order, **env):
    site = tmp_path / 'site'
    make_dist(site, 'shapes-dist', '1.0', {'shapes.group': ['one = shapes_mod:one', 'two = shapes_mod:two']})
    proc = subprocess.run([PYTHON, str(HERE / 'subinterp_probe.py'), str(tmp_path), 'shapes.group', order],
                          env=env_for(tmp_path, pythonpath=[site], extra=env), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize('order', ['main-first', 'sub-first'])
def test_a_query_in_a_subinterpreter_gets_importlibs_answer(tmp_path, order):
    report, stderr = subinterpreter_report(tmp_path, order, EPLOAD_IMPORTLIB='1', EPLOAD_DEBUG='1')
    assert report['main'] == [['one', 'shapes_mod:one', 'shapes.group'], ['two', 'shapes_mod:two', 'shapes.group']]
    assert report['runs']
    for name, run in report['runs'].items():
        assert run['error'] is None and run['answer'] == report['main'], (name, run)
        # importlib.metadata.entry_points as the main interpreter has it
        # (patched where the .pth hook runs, tests/torch/test_parity.py).
        assert run['function'] == report['function'], (name, run)
    assert 'native module cannot load here' in stderr


# ---- fork() while another thread loads a backend --------------------------------

GATE = '''
import threading
started = threading.Event()
release = threading.Event()
barrier = threading.Barrier(2)
seen = {}
'''

# Registers its device after its init said it started and was released.
WAITING = '''
import types
import fakehost

def _autoload():
    import fakehost_gate as gate
    gate.started.set()
    gate.release.wait()
    fakehost._register_device_module("fwdev", types.ModuleType("be_fw.fwdev"))
'''

# Looks up the other's device once both inits are under way.
CYCLING = '''
import types
import fakehost

def _autoload():
    import fakehost_gate as gate
    gate.barrier.wait()
    gate.seen["{me}"] = hasattr(fakehost, "{other}")
    fakehost._register_device_module("{me}", types.ModuleType("{name}.{me}"))
'''


def shapes_env(tmp_path):
    host_dir = tmp_path / 'hostdir'
    make_host(host_dir, 'epload-lazy')
    write(str(host_dir / 'fakehost_gate.py'), GATE)
    site = tmp_path / 'site'
    write(str(site / 'be_fw' / '__init__.py'), WAITING)
    make_dist(site, 'be_fw', '1.0', {'torch.backends': ['be_fw = be_fw:_autoload'],
                                     'epload.devices': ['fwdev = be_fw']})
    for name, me, other in (('be_ca', 'cadev', 'cbdev'), ('be_cb', 'cbdev', 'cadev')):
        write(str(site / name / '__init__.py'), CYCLING.format(me=me, other=other, name=name))
        make_dist(site, name, '1.0', {'torch.backends': [f'{name} = {name}:_autoload'],
                                      'epload.devices': [f'{me} = {name}']})
    return [host_dir, site]


PRELUDE = '''
import json, os, signal, sys, threading, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() of a threaded process
import fakehost, fakehost_gate as gate

def error(fn):
    try:
        fn()
    except BaseException as e:
        return [type(e).__name__, isinstance(e, AttributeError), str(e)]
    return None

def in_child():
    signal.alarm(60)  # a wait for ever ends here (SIGALRM), a failure
    return {"first": error(lambda: fakehost.fwdev), "again": error(lambda: fakehost.fwdev),
            "hasattr": hasattr(fakehost, "fwdev")}

got = {}
t = threading.Thread(target=lambda: got.setdefault("parent", fakehost.fwdev.__name__))
t.start()
gate.started.wait()
'''

OS_FORK = PRELUDE + '''
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, json.dumps(in_child()).encode())
    os._exit(0)
os.close(w)
gate.release.set()
t.join()
child = b""
while chunk := os.read(r, 65536):
    child += chunk
_, status = os.waitpid(pid, 0)
print(json.dumps({"parent": got, "child": json.loads(child or b"null"), "status": status}))
'''

MP_FORK = PRELUDE + '''
import multiprocessing
def target(conn):
    conn.send(in_child())
parent_end, child_end = multiprocessing.get_context("fork").Pipe()
p = multiprocessing.get_context("fork").Process(target=target, args=(child_end,))
p.start()
gate.release.set()
t.join()
child = parent_end.recv() if parent_end.poll(None) else None
p.join()
print(json.dumps({"parent": got, "child": child, "status": p.exitcode}))
'''


@pytest.mark.parametrize('how', ['os.fork', 'multiprocessing'])
def test_fork_while_another_thread_loads_a_backend_fails_it_clearly_in_the_child(tmp_path, how):
    paths = shapes_env(tmp_path)
    out = run_json(tmp_path, OS_FORK if how == 'os.fork' else MP_FORK, pythonpath=paths)
    assert out['status'] == 0, out
    assert out['parent'] == {'parent': 'be_fw.fwdev'}
    first = out['child']['first']
    assert first[1] is True, first  # an AttributeError (and a BackendError)
    assert "'be_fw'" in first[2] and 'forked' in first[2], first
    assert out['child']['again'] == first
    assert out['child']['hasattr'] is False


CYCLE = '''
import json, threading
import fakehost, fakehost_gate as gate
got = {}
def first_use(name):
    got[name] = getattr(fakehost, name).__name__
threads = [threading.Thread(target=first_use, args=(n,)) for n in ("cadev", "cbdev")]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"got": got, "seen": gate.seen}))
'''


def test_two_first_uses_whose_inits_wait_for_each_other_do_not_deadlock(tmp_path):
    paths = shapes_env(tmp_path)
    for i in range(5):
        # A cache of its own each time: while the two inits run at once, each
        # may learn the other's device too (a documented approximation), and
        # the next run would then wait for one backend in both threads.
        out = run_json(tmp_path, CYCLE, pythonpath=paths, env={'EPLOAD_CACHE_DIR': str(tmp_path / f'cache{i}')})
        assert out['got'] == {'cadev': 'be_ca.cadev', 'cbdev': 'be_cb.cbdev'}, out
        assert sorted(out['seen']) == ['cadev', 'cbdev'] and False in out['seen'].values(), out

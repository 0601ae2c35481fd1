"""Lazy autoload inside a real `import torch` (torch 2.13, the .pth hook with
EPLOAD_AUTOLOAD_HOSTS=torch): what loads when, exactly once, and what the
user sees when a backend fails."""

import json
import os
import pathlib
import subprocess

import pytest

# Each trigger of the PrivateUse1 device foo, and a check of its answer.
TRIGGERS = {
    'to': ('r = torch.ones(2).to("foo"); ok = str(r.device) == "foo:0" and r.cpu().tolist() == [1.0, 1.0]'),
    'empty': 'r = torch.empty(2, device="foo"); ok = r.device.type == "foo"',
    'tensor': ('r = torch.tensor([1.0], device="foo"); '
               'ok = r.device.type == "foo" and r.cpu().tolist() == [1.0]'),
    'attribute': 'r = torch.foo; ok = r.__name__ == "torch_foo.runtime"',
    'hasattr': 'ok = hasattr(torch, "foo")',
    'get_device_module': 'ok = torch.get_device_module("foo").__name__ == "torch_foo.runtime"',
    'accelerator_is_available': 'ok = torch.accelerator.is_available() is True',
    'accelerator_device_count': 'ok = torch.accelerator.device_count() == 1',
    # A pure-Python device has no storages: torch.load reaches the device
    # module (loaded by hasattr(torch, "foo")) and stops there, cleanly.
    'load_map_location': ('import io; b = io.BytesIO(); torch.save(torch.ones(2), b); b.seek(0)\n'
                          'try:\n    torch.load(b, map_location="foo"); ok = False\n'
                          'except NotImplementedError as e:\n    ok = "has no storages" in str(e)'),
}


@pytest.fixture(scope='module')
def learned(torch_python, tmp_path_factory):
    """foo, bar and the hook, their devices learned by a first run."""
    from conftest import Env
    env = Env(torch_python, tmp_path_factory.mktemp('learned'), ['foo', 'bar', 'hook'])
    first = env.learn()
    assert first['events'].count('foo import') == 1
    assert 'bar import' in first['events'] and 'hook entry_point' in first['events']
    return env


def test_import_torch_loads_no_backend_with_a_known_device(learned):
    got = learned.run('''
import importlib.util
import torch
out(modules=[m for m in ('torch_foo', 'torch_bar', 'torch_hook') if m in sys.modules],
    privateuse1=torch._C._get_privateuse1_backend_name(),
    hook_ran=os.environ.get('IS_CUSTOM_DEVICE_BACKEND_IMPORTED'),
    device=str(torch.device('foo:0')), accelerator=str(torch.accelerator.current_accelerator()),
    placeholders=['foo' in vars(torch), 'torch.foo' in sys.modules],
    spec=importlib.util.find_spec('torch.foo') is not None,
    still=[m for m in ('torch_foo',) if m in sys.modules])
''')
    assert got['modules'] == ['torch_hook']  # the hook ran at the end of import torch
    assert got['hook_ran'] == '1'
    assert got['privateuse1'] == 'foo'  # registered ahead: device strings parse
    assert got['device'] == 'foo:0' and got['accelerator'] == 'foo'
    assert got['placeholders'] == [False, False] and got['spec'] is True
    # torch.device, current_accelerator and find_spec load nothing
    assert got['still'] == []
    assert got['events'] == ['hook import', 'hook entry_point']


def test_the_privateuse1_name_is_a_learned_device_the_cli_lists(learned):
    # One store: the PrivateUse1 name foo is backend foo's device of kind
    # privateuse1 (it is torch.foo too), listed by `epload devices`.
    build = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', pathlib.Path(__file__).parents[2] / 'build'))
    proc = subprocess.run([str(build / 'epload'), 'devices', '--json', '--python', learned.python],
                          env=learned.environ(), cwd=str(learned.root), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    listed = {d['device']: (d['backend'], d['how'], d['kind'])
              for d in json.loads(proc.stdout)['devices']}
    assert listed['foo'] == ('foo', 'learned', 'privateuse1')
    assert listed['bar'] == ('bar', 'learned', 'attr')
    assert [p.name for p in learned.cache.iterdir() if p.name.startswith('devices-')] == []


@pytest.mark.parametrize('trigger', sorted(TRIGGERS))
def test_each_trigger_loads_foo_exactly_once(learned, trigger):
    got = learned.run(f'''
import torch
before = 'torch_foo' in sys.modules
{TRIGGERS[trigger]}
out(before=before, ok=ok)
''')
    assert got['before'] is False
    assert got['ok'] is True, got
    assert got['events'].count('foo import') == 1
    assert got['events'].count('foo entry_point') == 1
    assert got['events'].count('foo init') <= 1


RACE = '''
import threading
import torch
barrier = threading.Barrier(16)
results, errors = [], []
def work(code):
    barrier.wait()
    try:
        scope = {'torch': torch}
        exec(code, scope)
        results.append(scope['ok'])
    except BaseException as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(codes[i % len(codes)],)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
out(results=results, errors=errors)
'''


@pytest.mark.parametrize('trigger', ['to', 'attribute', 'all'])
def test_sixteen_threads_racing_load_foo_exactly_once(learned, trigger):
    codes = list(TRIGGERS.values()) if trigger == 'all' else [TRIGGERS[trigger]]
    got = learned.run(f'codes = {codes!r}\n' + RACE)
    assert got['errors'] == []
    assert got['results'] == [True] * 16
    assert got['events'].count('foo import') == 1
    assert got['events'].count('foo entry_point') == 1
    assert got['events'].count('foo init') <= 1


@pytest.mark.parametrize('threads', [1, 16])
def test_attribute_backend_loads_once_on_torch_bar(learned, threads):
    code = 'ok = torch.bar.ping() == "bar"'
    if threads == 1:
        got = learned.run(f'import torch\nbefore = "torch_bar" in sys.modules\n{code}\n'
                          'out(before=before, results=[ok], errors=[])')
        assert got['before'] is False
    else:
        got = learned.run(f'codes = {[code]!r}\n' + RACE)
    assert got['errors'] == [] and got['results'] == [True] * threads
    assert got['events'].count('bar import') == 1
    assert 'foo import' not in got['events']


@pytest.mark.parametrize('order', ['before', 'after'])
def test_explicit_import_of_the_backend_registers_once(learned, order):
    imports = 'import torch_foo\nimport torch' if order == 'before' else 'import torch\nimport torch_foo'
    got = learned.run(f'''
{imports}
import epload
r = torch.ones(2).to("foo")
out(ok=r.cpu().tolist() == [1.0, 1.0], same=torch.foo is torch_foo.runtime,
    module=sys.modules['torch.foo'] is torch_foo.runtime,
    state=[b.state for b in epload.backends() if b.name == 'foo'])
''')
    assert got['ok'] and got['same'] and got['module']
    assert got['events'].count('foo import') == 1
    assert got['state'] in (['ready'], ['unloaded'])


def test_a_backend_whose_module_checks_hasattr_itself(make_env):
    env = make_env('selfcheck')
    env.learn()
    got = env.run('codes = ["ok = torch.selfcheck.__name__ == \\"torch_selfcheck\\""]\n' + RACE)
    assert got['errors'] == [] and got['results'] == [True] * 16
    assert got['events'].count('selfcheck import') == 1


@pytest.mark.parametrize('switch', [None, '1'])
def test_switch_set_off_by_a_backend_is_restored(make_env, switch):
    env = make_env('switchoff', 'hook')
    env.learn(TORCH_DEVICE_BACKEND_AUTOLOAD=switch)
    got = env.run('''
import torch
before = os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD', 'unset')
name = torch.switchoff.__name__
out(before=before, name=name, after=os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD', 'unset'))
''', TORCH_DEVICE_BACKEND_AUTOLOAD=switch)
    expected = switch or 'unset'
    assert got['name'] == 'torch_switchoff'
    assert got['before'] == expected and got['after'] == expected
    assert got['events'].count('switchoff import') == 1


def test_changed_device_name_is_learned_again(make_env):
    env = make_env('foo')
    env.learn()
    # A new release of the backend names its device fooz (reinstalled: the
    # distribution's files are rewritten).
    init = env.path('foo') / 'torch_foo' / '__init__.py'
    init.write_text(init.read_text().replace("DEVICE = 'foo'", "DEVICE = 'fooz'"))
    eps = env.path('foo') / 'torch_foo-0.1.dist-info' / 'entry_points.txt'
    text = eps.read_text()
    eps.unlink()
    eps.write_text(text)
    got = env.run('''
import torch
r = torch.ones(2).to("fooz")
out(ok=r.cpu().tolist() == [1.0, 1.0], name=torch._C._get_privateuse1_backend_name())
''')
    assert got['ok'] and got['name'] == 'fooz'
    later = env.run('import torch\nout(name=torch._C._get_privateuse1_backend_name(), '
                    'loaded="torch_foo" in sys.modules)')
    assert later == {**later, 'name': 'fooz', 'loaded': False}


def test_opt_out_keeps_privateuse1_unregistered(learned):
    got = learned.run('''
import torch
name = torch._C._get_privateuse1_backend_name()
out(name=name, attr=torch.foo.__name__, after=torch._C._get_privateuse1_backend_name())
''', EPLOAD_NO_PRIVATEUSE1='foo')
    assert got['name'] == 'privateuseone'
    assert got['attr'] == 'torch_foo.runtime' and got['after'] == 'foo'
    assert got['events'].count('foo import') == 1


def test_two_privateuse1_backends(make_env):
    env = make_env('foo', 'qux')
    # The first run loads both: the first in discovery order wins, the
    # second fails to rename PrivateUse1, and import torch still works.
    first = env.learn()
    assert 'foo entry_point' in first['events'] and 'qux import' in first['events']
    assert 'qux' in first['stderr'] and 'RuntimeWarning' in first['stderr']
    env.learn(EPLOAD_DISABLE='foo')  # qux learned too
    got = env.run('''
import torch
name = torch._C._get_privateuse1_backend_name()
loaded = [m for m in ('torch_foo', 'torch_qux') if m in sys.modules]
qux = error(lambda: torch.qux)
foo = torch.foo.__name__
out(name=name, loaded=loaded, qux=qux, foo=foo, after=torch._C._get_privateuse1_backend_name(),
    tried=events())
''')
    # Two claimants load inside import torch, in discovery order, as in stock:
    # foo registers its name, qux fails to rename PrivateUse1 (stock's outcome;
    # its module, whose import failed, is not kept).
    assert got['name'] == 'foo' and got['loaded'] == ['torch_foo'] and 'qux import' in got['tried']
    assert got['after'] == 'foo' and got['foo'] == 'torch_foo.runtime'
    qux = got['qux']
    assert qux['runtime'] and qux['attribute'] and "'qux'" in qux['message']
    assert qux['cause'] is not None


def test_failing_backend_never_breaks_import_torch(make_env):
    env = make_env('foo', 'broken')
    env.learn()
    got = env.run('''
import torch
e = error(lambda: torch.broken)
out(error=e, has=hasattr(torch, 'broken'), ones=torch.ones(2).to('foo').cpu().tolist())
''')
    e = got['error']
    assert e['runtime'] and e['attribute']
    assert "'broken'" in e['message']
    assert 'EPLOAD_DISABLE=broken' in e['message'] and 'TORCH_DEVICE_BACKEND_AUTOLOAD=0' in e['message']
    assert e['cause'] == ['ImportError', 'torch_broken: the device driver is missing']
    assert got['has'] is False and got['ones'] == [1.0, 1.0]
    assert got['events'].count('broken import') == 1


@pytest.mark.parametrize('trigger', ['to', 'attribute'])
def test_learned_backend_that_now_fails_raises_at_first_use(learned, trigger):
    got = learned.run(f'''
import torch
def use():
    {TRIGGERS[trigger]}
out(first=error(use), second=error(use))
''', EPLOAD_TEST_FOO_FAIL='1')
    for e in (got['first'], got['second']):
        assert e['runtime'] and e['attribute'], e
        assert 'foo' in e['message'] and 'EPLOAD_DISABLE=foo' in e['message']
        assert e['cause'] == ['RuntimeError', 'torch_foo cannot start: EPLOAD_TEST_FOO_FAIL=1']
    assert got['events'].count('foo import') == 1  # failures are sticky


def test_torch_logs_naming_a_backend_component(learned):
    ok = learned.run('import torch\nout(ok=True)', TORCH_LOGS='foo_backend')
    assert ok['ok'] is True and 'foo import' in ok['events']
    bad = learned.run('import torch', expect_ok=False, TORCH_LOGS='no_such_component')
    assert bad['returncode'] != 0 and 'no_such_component' in bad['stderr']


def declare(env, backend, device, kind=None):
    eps = env.path(backend) / f'torch_{backend}-0.1.dist-info' / 'entry_points.txt'
    value = backend if kind is None else f'{backend} [{kind}]'
    eps.write_text(eps.read_text() + f'\n[epload.devices]\n{device} = {value}\n')


@pytest.mark.parametrize('trigger', sorted(TRIGGERS) + ['device'])
def test_a_declared_device_works_at_its_first_use_on_the_first_run(make_env, trigger):
    # A backend that declares its PrivateUse1 device as the README says
    # ("foo [privateuse1]"): the name is registered at the end of the very
    # first `import torch`, so every trigger works and loads it once, before
    # anything was learned.
    env = make_env('foo')
    declare(env, 'foo', 'foo', 'privateuse1')
    code = TRIGGERS.get(trigger, 'r = torch.device("foo"); ok = str(r) == "foo"')
    got = env.run(f'''
import torch
before = 'torch_foo' in sys.modules
name = torch._C._get_privateuse1_backend_name()
{code}
out(before=before, name=name, ok=ok, after='torch_foo' in sys.modules)
''')
    assert got['before'] is False and got['name'] == 'foo'
    assert got['ok'] is True, got
    if trigger == 'device':
        assert got['after'] is False  # parsing loads nothing
        assert got['events'] == []
    else:
        assert got['events'].count('foo import') == 1
        assert got['events'].count('foo entry_point') == 1


def test_two_declared_privateuse1_devices_load_at_import_in_discovery_order(make_env):
    # Two claims: which one gets the name is stock's order's answer, so both
    # load inside import torch, in that order; the first registers its name.
    env = make_env('foo', 'qux')
    declare(env, 'foo', 'foo', 'privateuse1')
    declare(env, 'qux', 'qux', 'privateuse1')
    got = env.run('''
import torch
name = torch._C._get_privateuse1_backend_name()
loaded = [m for m in ('torch_foo', 'torch_qux') if m in sys.modules]
out(name=name, loaded=loaded, foo=torch.foo.__name__, ones=torch.ones(2).to('foo').cpu().tolist(),
    tried=events())
''')
    assert got['name'] == 'foo' and got['loaded'] == ['torch_foo'] and 'qux import' in got['tried']
    assert got['foo'] == 'torch_foo.runtime' and got['ones'] == [1.0, 1.0]


@pytest.mark.parametrize('kind', [None, 'privateuse1'])
def test_a_declared_device_that_torch_owns_is_not_privateuse1(make_env, kind):
    # Declaring one of torch's own device types says nothing of PrivateUse1,
    # and torch's device is never the backend's: nothing loads.
    env = make_env('foo')
    declare(env, 'foo', 'mtia', kind)
    got = env.run('''
import torch
out(name=torch._C._get_privateuse1_backend_name(), loaded='torch_foo' in sys.modules)
''')
    assert got == {**got, 'name': 'privateuseone', 'loaded': False}


def test_device_clashes_are_warned_at_import_torch_and_torchs_module_is_never_the_answer(make_env):
    # foo declares xpu, torch's own type, and its foo, which qux declares too:
    # `import torch` warns of both (naming both backends), loads nothing, and
    # epload.device("xpu") raises rather than hand back torch.xpu.
    env = make_env('foo', 'qux')
    declare(env, 'foo', 'xpu')
    declare(env, 'foo', 'foo', 'privateuse1')
    declare(env, 'qux', 'foo', 'privateuse1')
    got = env.run('''
import torch, epload
loaded = [m for m in ('torch_foo', 'torch_qux') if m in sys.modules]
out(loaded=loaded, device=error(lambda: epload.device('xpu')), xpu=torch.xpu.__name__)
''')
    assert got['loaded'] == []
    lines = got['stderr'].splitlines()
    own = [line for line in lines if "device 'xpu' of backend 'foo' is PyTorch's own device type" in line]
    both = [line for line in lines if "device 'foo' is also provided by backend" in line]
    assert len(own) == 1 and len(both) == 1, got['stderr']
    assert "'foo'" in both[0] and "'qux'" in both[0], both
    assert got['device']['type'] == 'BackendError' and "PyTorch's own" in got['device']['message'], got
    assert got['xpu'] == 'torch.xpu'


def test_declared_device_opt_out_keeps_privateuse1_unregistered(make_env):
    env = make_env('foo')
    declare(env, 'foo', 'foo', 'privateuse1')
    got = env.run('''
import torch
name = torch._C._get_privateuse1_backend_name()
out(name=name, attr=torch.foo.__name__, after=torch._C._get_privateuse1_backend_name())
''', EPLOAD_NO_PRIVATEUSE1='foo')
    assert got['name'] == 'privateuseone'
    assert got['attr'] == 'torch_foo.runtime' and got['after'] == 'foo'


def test_torch_logs_loading_a_failing_backend_warns_and_imports(make_env):
    env = make_env('foo', 'broken')
    env.learn()
    got = env.run('import torch\nout(foo=torch.foo.__name__)', TORCH_LOGS='foo_backend',
                  PYTHONWARNINGS='default')
    assert got['foo'] == 'torch_foo.runtime'
    assert 'RuntimeWarning' in got['stderr'] and 'backend extension: broken' in got['stderr']
    assert got['events'].count('broken import') == 1


def test_a_first_eager_run_learns_the_privateuse1_name_for_lazy_runs(make_env):
    # An eager run loads every backend in PyTorch's loop; what it learns
    # must include foo's PrivateUse1 name, or a later lazy run cannot parse
    # "foo" until foo is loaded (and nothing would load it: t.to("foo")
    # fails to parse first).
    env = make_env('foo')
    first = env.run('import torch\nout()', EPLOAD_MODE='eager')
    assert first['events'].count('foo import') == 1
    got = env.run('''
import torch
before = 'torch_foo' in sys.modules
x = torch.ones(2).to("foo")
out(before=before, device=str(x.device), values=x.cpu().tolist())
''')
    assert got['before'] is False
    assert got['device'] == 'foo:0' and got['values'] == [1.0, 1.0]
    assert got['events'].count('foo import') == 1


def test_an_import_that_looked_before_another_thread_finished_the_load_finds_foo(learned):
    # Thread B imports torch.foo (.to("foo")): the import system finds it
    # missing from sys.modules, then asks the finders, holding the import
    # lock of torch.foo.  The main thread's torch.foo meanwhile takes that
    # lock before it may load foo, so it waits for B's import (B is held at
    # that point by a trace function, released after a while): both get the
    # module the backend registered.
    got = learned.run('''
import threading
import torch
paused, resume = threading.Event(), threading.Event()
def hold(frame, event, arg):
    if event == 'call' and frame.f_code.co_name == '_find_spec' and frame.f_locals.get('name') == 'torch.foo':
        paused.set()
        resume.wait()
    return None
result = {}
def b():
    sys.settrace(hold)
    try:
        result['b'] = torch.ones(2).to("foo").cpu().tolist()
    except BaseException as e:
        result['b'] = repr(e)
    finally:
        sys.settrace(None)
t = threading.Thread(target=b)
t.start()
paused.wait()
threading.Timer(1.0, resume.set).start()
first = torch.foo.__name__
t.join()
out(first=first, b=result['b'], module=sys.modules['torch.foo'] is torch.foo)
''')
    assert got['first'] == 'torch_foo.runtime'
    assert got['b'] == [1.0, 1.0]
    assert got['module'] is True
    assert got['events'].count('foo import') == 1


# How another thread reaches foo while the loading thread is held between
# the registration of foo's module and its kernels; each answer is whether
# what it got is the whole backend (its Tensor type is set after the kernels).
HALF_LOADED = {
    'attribute': 'm = torch.foo; got = hasattr(m, "Tensor")',
    'getattr': 'got = hasattr(getattr(torch, "foo"), "Tensor")',
    'import': 'import importlib; got = hasattr(importlib.import_module("torch.foo"), "Tensor")',
    'from_import': 'from torch import foo; got = hasattr(foo, "Tensor")',
    'to': 'got = torch.ones(2).to("foo").cpu().tolist() == [1.0, 1.0]',
}


@pytest.mark.parametrize('trigger', sorted(HALF_LOADED))
def test_no_thread_sees_a_half_loaded_backend(learned, tmp_path, trigger):
    # The loading thread (torch.foo) is held after foo registered its module
    # and before its kernels; another thread asks for foo then: it waits for
    # the load to end and gets the whole backend, never the half of it.
    got = learned.run(f'''
import threading, time
import torch
hold = os.environ["EPLOAD_TEST_HOLD"]
answers = {{}}
def loader():
    answers["loader"] = hasattr(torch.foo, "Tensor")
def other():
    try:
        {HALF_LOADED[trigger]}
    except Exception as e:
        got = repr(e)
    answers["other"] = got
    answers["released_before"] = os.path.exists(os.path.join(hold, "release"))
a = threading.Thread(target=loader)
a.start()
while not os.path.exists(os.path.join(hold, "registered")):
    time.sleep(0.005)
b = threading.Thread(target=other)
b.start()
b.join(1.0)
answers["waited"] = b.is_alive()
open(os.path.join(hold, "release"), "w").close()
a.join(); b.join()
out(**answers)
''', EPLOAD_TEST_HOLD=str(tmp_path))
    assert got['loader'] is True
    assert got['other'] is True, got  # the whole backend
    assert got['waited'] is True and got['released_before'] is True, got
    assert got['events'].count('foo import') == 1

"""When PyTorch's PrivateUse1 name is registered ahead of a backend's load:
only for a backend known to register that very name itself (a probe saw it,
or its distribution declares the device ``[privateuse1]``).  An attribute
device (``torch.toy = ...``) never takes PrivateUse1, so a real PrivateUse1
backend installed later works, and torch.accelerator answers as stock torch
does."""

import shutil

import pytest

from conftest import BACKENDS

# A tensor moved to the real PrivateUse1 device foo and back, and its module.
USE_FOO = '''
x = torch.ones(2).to("foo")
foo = dict(device=str(x.device), values=x.cpu().tolist(), module=torch.foo.__name__)
'''

# What the user sees of PrivateUse1 and the accelerator, before anything
# else touches a device.
STATE = '''
import torch
loaded = sorted(m for m in ('torch_toy', 'torch_foo') if m in sys.modules)
name = torch._C._get_privateuse1_backend_name()
accelerator = torch.accelerator.current_accelerator()
'''


def set_declaration(env, backend, text):
    eps = env.path(backend) / f'torch_{backend}-0.1.dist-info' / 'entry_points.txt'
    lines = [line for line in eps.read_text().split('\n[epload.devices]')[0].splitlines()]
    eps.write_text('\n'.join(lines) + (f'\n\n[epload.devices]\n{text}\n' if text else '\n'))


def install(env, backend):
    """Installs a fixture backend into an existing environment (a later
    pip install)."""
    target = env.root / 'site' / backend
    shutil.copytree(BACKENDS / backend, target)
    env.dirs.append(target)


@pytest.mark.parametrize('declaration', ['toy = toy', 'toy = toy [attr]', 'toy = toy:attr'])
def test_an_attribute_device_leaves_privateuse1_to_a_backend_installed_later(make_env, declaration):
    env = make_env('toy')
    set_declaration(env, 'toy', declaration)
    for run in range(2):
        got = env.run(STATE + 'out(loaded=loaded, name=name, accelerator=str(accelerator), '
                              'toy=torch.toy.ping())')
        assert got['name'] == 'privateuseone' and got['accelerator'] == 'None', (run, got)
        assert got['toy'] == 'toy'
        # Declared without a kind, the kind is learned as stock torch would
        # load it: at import, on the first run only; [attr] is lazy at once.
        eager = run == 0 and 'attr' not in declaration
        assert got['loaded'] == (['torch_toy'] if eager else []), (run, got)
        assert got['events'].count('toy import') == 1
    install(env, 'foo')
    for run in range(2):
        got = env.run(STATE + USE_FOO + 'out(name=name, foo=foo, toy=torch.toy.ping())')
        assert got['foo'] == {'device': 'foo:0', 'values': [1.0, 1.0], 'module': 'torch_foo.runtime'}, \
            (run, got)
        assert got['toy'] == 'toy'


def test_a_device_declared_without_a_kind_that_is_privateuse1_works_on_the_first_run(make_env):
    env = make_env('foo')
    set_declaration(env, 'foo', 'foo = foo')
    first = env.run(STATE + USE_FOO + 'out(loaded=loaded, name=name, foo=foo)')
    assert first['loaded'] == ['torch_foo'] and first['name'] == 'foo'  # at import, as stock
    assert first['foo']['values'] == [1.0, 1.0]
    later = env.run(STATE + USE_FOO + 'out(loaded=loaded, name=name, foo=foo)')
    assert later['loaded'] == [] and later['name'] == 'foo'  # learned: registered ahead, lazy
    assert later['foo']['values'] == [1.0, 1.0]
    assert later['events'].count('foo import') == 1


@pytest.mark.parametrize('declaration', ['foo = foo [privateuse1]', 'foo = foo:privateuse1'])
def test_a_device_declared_privateuse1_is_registered_ahead_from_the_first_run(make_env, declaration):
    env = make_env('foo')
    set_declaration(env, 'foo', declaration)
    for run in range(2):
        got = env.run(STATE + USE_FOO + 'out(loaded=loaded, name=name, foo=foo)')
        assert got['loaded'] == [] and got['name'] == 'foo', (run, got)
        assert got['foo']['values'] == [1.0, 1.0]
        assert got['events'].count('foo import') == 1


def test_a_privateuse1_declaration_the_backend_does_not_keep_is_unlearned(make_env):
    # toy says [privateuse1] but only sets torch.toy: the name registered
    # ahead on the first run is not taken for the backend's own, and later
    # runs register nothing.
    env = make_env('toy')
    set_declaration(env, 'toy', 'toy = toy [privateuse1]')
    first = env.run(STATE + 'out(loaded=loaded, name=name, toy=torch.toy.ping())')
    assert first['loaded'] == [] and first['name'] == 'toy' and first['toy'] == 'toy'
    for run in range(2):
        got = env.run(STATE + 'out(name=name, accelerator=str(accelerator), toy=torch.toy.ping())')
        assert got['name'] == 'privateuseone' and got['accelerator'] == 'None', (run, got)
        assert got['toy'] == 'toy'


def test_an_unknown_declared_kind_is_a_warning_naming_the_distribution(make_env):
    env = make_env('toy')
    set_declaration(env, 'toy', 'toy = toy [gpu]')
    got = env.run(STATE + 'out(name=name, toy=torch.toy.ping())', PYTHONWARNINGS='default')
    warned = [line for line in got['stderr'].splitlines() if "'torch-toy'" in line]
    assert len(warned) == 1 and 'privateuse1, attr' in warned[0], got['stderr']
    assert got['name'] == 'privateuseone' and got['toy'] == 'toy'


def test_a_store_that_took_an_attribute_device_for_privateuse1_is_not_trusted(make_env):
    # The store as earlier versions wrote it after registering the declared
    # toy ahead: toy recorded as PrivateUse1.
    env = make_env('toy')
    env.run('import torch\nout()')
    [store] = [p for p in env.cache.iterdir() if p.name.startswith('learned-')]
    lines = store.read_text().split('\n')
    fields = lines[1].split('\t')
    fields[9] = 'l:toy=privateuse1'
    store.write_text('\n'.join(['epload-learned 4', '\t'.join(fields)] + lines[2:]))
    got = env.run(STATE + 'out(name=name, accelerator=str(accelerator))')
    assert got['name'] == 'privateuseone' and got['accelerator'] == 'None'


ACCELERATOR = '''
def answer(f):
    try:
        return f()
    except Exception as e:
        return type(e).__name__
a = torch.accelerator
out(current=str(a.current_accelerator()), available=answer(a.is_available),
    count=answer(a.device_count), index=answer(a.current_device_index))
'''


@pytest.mark.parametrize('declaration', ['toy = toy', 'toy = toy [attr]', 'foo = foo',
                                         'foo = foo [privateuse1]', None])
def test_the_accelerator_answers_as_stock_torch_before_the_first_load(make_env, declaration):
    backend = 'foo' if declaration is None or declaration.startswith('foo') else 'toy'
    env = make_env(backend)
    if declaration is not None:
        set_declaration(env, backend, declaration)
    stock = env.run('import torch\n' + ACCELERATOR, EPLOAD_AUTOLOAD_HOSTS=None,
                    TORCH_DEVICE_BACKEND_AUTOLOAD='1')
    for run in range(2):
        got = env.run('import torch\n' + ACCELERATOR)
        assert {k: got[k] for k in ('current', 'available', 'count', 'index')} == \
            {k: stock[k] for k in ('current', 'available', 'count', 'index')}, (run, got, stock)

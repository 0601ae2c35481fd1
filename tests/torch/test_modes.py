"""EPLOAD_MODE=eager is stock torch exactly, `off` and the switch load
nothing, and PyTorch's own autoload contract holds under epload."""

import pytest

# What a child reports of import torch: the error (if any) and its cause.
IMPORT = '''
try:
    import torch
    e = None
except BaseException as err:
    e = {'type': type(err).__name__, 'message': str(err),
         'cause': None if err.__cause__ is None else [type(err.__cause__).__name__, str(err.__cause__)]}
out(error=e, hook=os.environ.get('IS_CUSTOM_DEVICE_BACKEND_IMPORTED'),
    privateuse1=None if e else sys.modules['torch']._C._get_privateuse1_backend_name())
'''

STOCK = {'EPLOAD_AUTOLOAD_HOSTS': None}


@pytest.mark.parametrize('backends', [('hook', 'foo', 'bar'), ('hook', 'foo', 'broken', 'bar')],
                         ids=['working', 'third-fails'])
def test_eager_is_stock_torch(make_env, backends):
    env = make_env(*backends)
    stock = env.run(IMPORT, **STOCK)
    eager = env.run(IMPORT, EPLOAD_MODE='eager')
    for got in (stock, eager):
        del got['stderr']
    assert eager == stock
    if 'broken' in backends:
        assert stock['error'] == {
            'type': 'RuntimeError',
            'message': 'Failed to load the backend extension: broken. You can disable extension '
                       'auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.',
            'cause': ['ImportError', 'torch_broken: the device driver is missing']}
        assert 'bar import' not in stock['events']  # stops at the first failure
    else:
        assert stock['error'] is None and stock['privateuse1'] == 'foo'
    assert stock['events'][:3] == ['hook import', 'hook entry_point', 'foo import']


@pytest.mark.parametrize('how', ['EPLOAD_MODE=off', 'TORCH_DEVICE_BACKEND_AUTOLOAD=0'])
def test_off_loads_nothing(make_env, how):
    env = make_env('hook', 'foo', 'bar')
    env.learn()
    name, _, value = how.partition('=')
    got = env.run(IMPORT, **{name: value})
    assert got['error'] is None and got['events'] == []
    assert got['hook'] is None and got['privateuse1'] == 'privateuseone'


@pytest.mark.parametrize('mode', ['stock', 'lazy', 'eager'])
@pytest.mark.parametrize('switch', [None, '1', '0', 'true'])
def test_hook_ran_iff_autoload_switch_is_1_or_unset(make_env, mode, switch):
    """PyTorch's test_autoload: IS_CUSTOM_DEVICE_BACKEND_IMPORTED ==
    TORCH_DEVICE_BACKEND_AUTOLOAD."""
    env = make_env('hook')
    extra = dict(STOCK) if mode == 'stock' else {'EPLOAD_MODE': mode}
    got = env.run(IMPORT, TORCH_DEVICE_BACKEND_AUTOLOAD=switch, **extra)
    assert got['error'] is None
    assert (got['hook'] == '1') == (switch in (None, '1'))

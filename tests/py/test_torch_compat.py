"""PyTorch's device-backend autoload, reproduced: a host package whose import ends
the way torch/__init__.py does, run with PyTorch's own loop (importlib.metadata,
the oracle) and with epload's (epload.torch functions, epload.autoload eager);
every scenario must give the same outcome: the same exception text and cause,
the same backend imports and calls in the same order.
"""

import pytest

from pyfixtures import OUTCOME, make_backend, make_host, run_json

EPLOAD_STYLES = ('epload-torch', 'epload-eager')
MESSAGE = ('Failed to load the backend extension: {}. '
           'You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.')


def outcomes(tmp_path, build, *, env=None, prelude='', runtime_path=None):
    """{style: outcome} for the oracle and each epload style.  ``build(root)``
    creates the backends: each style gets its own fresh copy of the tree."""
    results = {}
    for style in ('pytorch', *EPLOAD_STYLES):
        root = tmp_path / style
        host_dir = root / 'hostdir'
        make_host(host_dir, style)
        sites = build(root)
        pythonpath = [host_dir] if runtime_path else [host_dir, *sites]
        code = prelude
        if runtime_path:
            code = f'import sys\nsys.path[:0] = {[str(s) for s in sites]!r}\n' + code
        results[style] = run_json(tmp_path, code + OUTCOME, pythonpath=pythonpath, env=env)
    for style in EPLOAD_STYLES:
        assert results[style] == results['pytorch'], style
    return results['pytorch']


def one_normal(root):
    make_backend(root / 's1', 'be_a')
    return [root / 's1']


@pytest.mark.parametrize('switch,enabled', [
    (None, True), ('1', True), ('0', False), ('', False), ('true', False)])
def test_switch(tmp_path, switch, enabled):
    env = {} if switch is None else {'TORCH_DEVICE_BACKEND_AUTOLOAD': switch}
    out = outcomes(tmp_path, one_normal, env=env)
    assert out['error'] is None
    if enabled:
        assert out['events'] == [['import', 'be_a'], ['call', 'be_a']]
        assert out['imported'] == ['be_a']
    else:
        assert out['events'] == [] and out['imported'] == []


def test_is_enabled_function_matches_pytorch(tmp_path):
    from pyfixtures import run_py
    for value in (None, '1', '0', '', 'true', ' 1', '1 '):
        env = {} if value is None else {'TORCH_DEVICE_BACKEND_AUTOLOAD': value}
        proc = run_py(tmp_path, 'import epload.torch as t; print(t.is_device_backend_autoload_enabled())',
                      env=env)
        assert proc.stdout.strip() == str(value in (None, '1'))


def test_discovery_from_pythonpath_in_path_order(tmp_path):
    def build(root):
        make_backend(root / 's1', 'be_a')
        make_backend(root / 's2', 'be_b')
        make_backend(root / 's3', 'be_c')
        return [root / 's2', root / 's1', root / 's3']
    out = outcomes(tmp_path, build)
    assert [e for e in out['events'] if e[0] == 'call'] == [
        ['call', 'be_b'], ['call', 'be_a'], ['call', 'be_c']]


def test_discovery_from_sys_path_added_at_run_time(tmp_path):
    def build(root):
        make_backend(root / 's1', 'be_a')
        make_backend(root / 's2', 'be_b')
        return [root / 's1', root / 's2']
    out = outcomes(tmp_path, build, runtime_path=True)
    assert out['events'] == [['import', 'be_a'], ['call', 'be_a'],
                             ['import', 'be_b'], ['call', 'be_b']]


@pytest.mark.parametrize('kind,cause', [
    ('import-error', ['ImportError', 'be_bad cannot find its native library']),
    ('missing-attr', ['AttributeError', "module 'be_bad' has no attribute '_autoload'"]),
    ('not-callable', ['TypeError', "'int' object is not callable"]),
    ('raises', ['ValueError', 'be_bad: no device found']),
])
def test_failure_raises_with_cause_and_stops_at_the_first(tmp_path, kind, cause):
    def build(root):
        make_backend(root / 's1', 'be_ok')
        make_backend(root / 's2', 'be_bad', kind)
        make_backend(root / 's3', 'be_bad2', 'raises')  # never reached
        make_backend(root / 's4', 'be_late')            # never reached
        return [root / 's1', root / 's2', root / 's3', root / 's4']
    out = outcomes(tmp_path, build)
    assert out['error'] == ['RuntimeError', MESSAGE.format('be_bad')]
    assert out['cause'] == cause
    assert out['imported'] == ['be_bad', 'be_ok'] or out['imported'] == ['be_ok']
    assert all(e[1] in ('be_ok', 'be_bad') for e in out['events'])


def test_backend_working_at_import_with_a_do_nothing_callable(tmp_path):
    def build(root):
        make_backend(root / 's1', 'be_w', 'import-work')
        return [root / 's1']
    out = outcomes(tmp_path, build, prelude='', env={})
    assert out['events'] == [['import', 'be_w'], ['call', 'be_w']]


def test_backend_importing_the_host_first(tmp_path):
    def build(root):
        make_backend(root / 's1', 'be_c', 'circular')
        return [root / 's1']
    out = outcomes(tmp_path, build)
    assert out['error'] is None
    assert out['events'] == [['import', 'be_c'], ['call', 'be_c']]


@pytest.mark.parametrize('kind', ['callable-first', 'circular'])
def test_backend_imported_explicitly_before_the_host(tmp_path, kind):
    def build(root):
        make_backend(root / 's1', 'be_x', kind)
        return [root / 's1']
    prelude = '''
try:
    import be_x
except BaseException as e:
    pass
'''
    out = outcomes(tmp_path, build, prelude=prelude)
    if kind == 'callable-first':
        # habana's pattern: defined before it imports the host, so it works.
        assert out['error'] is None and ['call', 'be_x'] in out['events']


def test_duplicate_distributions_first_on_the_path_wins(tmp_path):
    def build(root):
        make_backend(root / 's1', 'be_first', dist='dupdist', version='2.0')
        make_backend(root / 's2', 'be_second', dist='dupdist', version='1.0')
        return [root / 's1', root / 's2']
    out = outcomes(tmp_path, build)
    assert out['events'] == [['import', 'be_first'], ['call', 'be_first']]
    assert out['imported'] == ['be_first']


def test_no_backends_installed(tmp_path):
    out = outcomes(tmp_path, lambda root: [])
    assert out == {'error': None, 'cause': None, 'events': [], 'imported': []}


def test_malformed_entry_points_file_raises_what_importlib_raises(tmp_path):
    from pyfixtures import make_dist

    def build(root):
        make_backend(root / 's1', 'be_a')
        make_dist(root / 's1', 'broken', entry_points=b'[torch.backends]\nno equals sign\n')
        return [root / 's1']
    out = outcomes(tmp_path, build)
    assert out['error'] is not None and out['events'] == []

"""The switches as the Python package reads them: one on/off table shared
with the core (and so with the `epload` command), a name in EPLOAD_DISABLE /
EPLOAD_ENABLE that is no backend is one warning naming the close ones, a
bad value's warning points at the user's line, and the device of a disabled
backend on a host with a __getattr__ of its own (as torch has) names the
variable."""

import os
import warnings

import pytest

import epload
from epload import _flags
from epload._entry_points import _native_module
from pyfixtures import make_backend, run_py

VALUES = ['1', 'true', 'True', 'YES', 'on', '0', 'false', 'No', 'OFF', '', 'maybe', '2', 'enabled']


@pytest.mark.parametrize('value', VALUES)
def test_the_package_and_the_core_read_on_off_switches_by_one_table(value, monkeypatch):
    monkeypatch.setenv('EPLOAD_AUTOLOAD', value)
    _, off_by, _, _, core_warnings = _native_module().switches('any.group')
    _flags._warned.discard(core_warnings[0] if core_warnings else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        on = _flags.flag('EPLOAD_AUTOLOAD', True)
    assert on == (off_by == ''), value
    assert [str(w.message) for w in caught] == core_warnings, value
    assert all(w.category is RuntimeWarning for w in caught)
    if value.lower() in _flags.ON + _flags.OFF:
        assert core_warnings == []
    else:
        assert core_warnings == [f"EPLOAD_AUTOLOAD='{value}' is not one of 1, true, yes, on, 0, false, no, "
                                 f"off: using 1"]


def test_no_cache_and_debug_use_the_table(monkeypatch):
    from epload import _entry_points as eps
    for value, on in (('yes', True), ('1', True), ('off', False), ('', False)):
        monkeypatch.setenv('EPLOAD_NO_CACHE', value)
        monkeypatch.setenv('EPLOAD_DEBUG', value)
        assert eps._use_cache() is not on and eps._debug_enabled() is on, value


# A host with a module __getattr__ of its own, as torch has, autoloaded by
# the hook (EPLOAD_AUTOLOAD_HOSTS) as torch is: the user's line is then the
# `import ownhost`.
HOST_WITH_GETATTR = '''
def __getattr__(name):
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''

USER = '''\
import epload._hook; epload._hook.install()
import ownhost
try:
    ownhost.be_adev
except AttributeError as e:
    print("AttributeError:", e)
'''


def make_tree(tmp_path):
    site = tmp_path / 'site'
    (site / 'ownhost').mkdir(parents=True)
    (site / 'ownhost' / '__init__.py').write_text(HOST_WITH_GETATTR)
    make_backend(str(site), 'be_a', declare=True, host='ownhost')
    make_backend(str(site), 'be_b', declare=True, host='ownhost')
    (tmp_path / 'user.py').write_text(USER)
    return site


def run_user(tmp_path, site, **env):
    return run_py(tmp_path, 'import runpy; runpy.run_path("user.py", run_name="__main__")',
                  pythonpath=[site], env={'EPLOAD_AUTOLOAD_HOSTS': 'ownhost', **env})


def test_a_disabled_backends_device_names_the_variable_on_a_host_with_its_own_getattr(tmp_path):
    site = make_tree(tmp_path)
    proc = run_user(tmp_path, site, EPLOAD_DISABLE='be_a')
    assert ("AttributeError: module 'ownhost' has no attribute 'be_adev' (its backend 'be_a' is "
            "disabled by EPLOAD_DISABLE)") in proc.stdout, proc.stdout + proc.stderr
    proc = run_user(tmp_path, site, EPLOAD_ENABLE='be_b')
    assert "(its backend 'be_a' is disabled by EPLOAD_ENABLE)" in proc.stdout, proc.stdout + proc.stderr


def test_a_name_that_matches_no_backend_is_one_warning_at_the_users_line(tmp_path):
    site = make_tree(tmp_path)
    proc = run_user(tmp_path, site, EPLOAD_DISABLE='be_c, be_a, zzz', EPLOAD_ENABLE='')
    lines = [l for l in proc.stderr.splitlines() if 'RuntimeWarning' in l]
    assert lines == [
        "user.py:2: RuntimeWarning: EPLOAD_DISABLE names 'be_c', which is no backend of group "
        "'torch.backends' (close: be_b, be_a)",
        "user.py:2: RuntimeWarning: EPLOAD_DISABLE names 'zzz', which is no backend of group "
        "'torch.backends' (none is close; `epload devices --group torch.backends` lists them)",
    ], proc.stderr
    # Entry-point and distribution names that match are no warning.
    proc = run_user(tmp_path, site, EPLOAD_DISABLE='be_a', EPLOAD_ENABLE='be-a,be_b')
    assert 'RuntimeWarning' not in proc.stderr, proc.stderr


def test_a_bad_value_is_a_warning_at_the_users_line(tmp_path):
    site = make_tree(tmp_path)
    proc = run_user(tmp_path, site, EPLOAD_MODE='sometimes', EPLOAD_VALIDATE='x', EPLOAD_AUTOLOAD='maybe')
    lines = sorted(l for l in proc.stderr.splitlines() if 'RuntimeWarning' in l)
    assert lines == sorted([
        "user.py:2: RuntimeWarning: EPLOAD_MODE='sometimes' is not one of lazy, eager, off: using lazy",
        "user.py:2: RuntimeWarning: EPLOAD_VALIDATE='x' is not one of full, paths: using full",
        "user.py:2: RuntimeWarning: EPLOAD_AUTOLOAD='maybe' is not one of 1, true, yes, on, 0, false, no, "
        "off: using 1",
    ]), proc.stderr

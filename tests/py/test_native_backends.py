"""Native (C ABI) backends in a Python host of the user's own
(``epload.autoload(group, host=...)``): loaded through the core's loader
(dlopen + init) on the first use of a device, never imported as a module;
failures as for Python backends; one learned store the command agrees with
in either order; a crash in init remembered by the next process; the
header shipped with the package.  Real libraries (tests/backends), real
dlopen, real interpreters."""

import importlib.machinery
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from pyfixtures import BUILD_DIR, PACKAGE_DIR, SOURCE_DIR, env_for, make_dist, run_py

BACKENDS = pathlib.Path(BUILD_DIR) / 'tests' / 'backends'
EPLOAD = pathlib.Path(BUILD_DIR) / 'epload'
GROUP = 'myhost.backends'
PYTHON = os.environ.get('EPLOAD_PYTHON', '/usr/bin/python3')
# The file name setuptools gives an extension: the interpreter's EXT_SUFFIX.
SUFFIX = subprocess.run([PYTHON, '-c', 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))'],
                        capture_output=True, text=True, check=True).stdout.strip()


def install(site, dist, variant, device=None):
    """dist/_native<EXT_SUFFIX> (a copy of test backend `variant`) and its
    entry point `dist = dist._native:tb_init` in GROUP."""
    pkg = site / dist
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / '__init__.py').write_text('')
    lib = pkg / ('_native' + SUFFIX)
    shutil.copyfile(BACKENDS / f'{variant}.so', lib)
    make_dist(str(site), dist, entry_points={GROUP: [f'{dist} = {dist}._native:tb_init']})
    return lib


HOST = '''
import ctypes, sys, types, warnings
import epload
host = types.ModuleType('myhost')
sys.modules['myhost'] = host
def mapped(lib):
    with open('/proc/self/maps') as f:
        return lib in f.read()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    line = sys._getframe().f_lineno + 1
    session = epload.autoload('myhost.backends', host=host)
warned = [[str(w.message), w.lineno == line] for w in caught]
'''


def host_run(tmp_path, site, code, check=True):
    proc = run_py(tmp_path, HOST + code, pythonpath=[site], check=check)
    lines = [line for line in proc.stdout.splitlines() if line.startswith('@@')]
    return (json.loads(lines[-1][2:]) if lines else None), proc


def cli(tmp_path, site, *args, check=None):
    """The command for the Python host's own sys.path (same interpreter,
    environment and directory): the same learned store."""
    proc = subprocess.run([str(EPLOAD), *args, '--group', GROUP, '--python', PYTHON],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                          env=env_for(tmp_path, pythonpath=[site]))
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def test_python_host_dlopens_a_native_backend_lazily(tmp_path):
    site = tmp_path / 'site'
    lib = install(site, 'npu', 'tb_npu')
    got, _ = host_run(tmp_path, site, '''
before = mapped(LIB)
d = epload.device('tnpu')
magic = ctypes.c_uint32.from_address(d.table).value
again = host.tnpu
import json
print('@@' + json.dumps(dict(before=before, after=mapped(LIB), type=type(d).__name__, backend=d.backend,
                             magic=magic, same=again.table == d.table, warned=warned,
                             imported='npu._native' in sys.modules,
                             kind=session.backends[0]._status().kind.name)))
'''.replace('LIB', repr(str(lib))))
    assert got['before'] is False and got['after'] is True
    assert got['type'] == 'NativeDevice' and got['backend'] == 'npu' and got['same']
    assert got['magic'] == 0x7e57bac3  # the backend's own table (TB_MAGIC)
    assert got['imported'] is False and got['kind'] == 'native' and got['warned'] == []


def test_failing_native_backend_fails_as_a_python_backend_does(tmp_path):
    site = tmp_path / 'site'
    install(site, 'flaky', 'tb_fail')
    install(site, 'npu', 'tb_npu')
    got, _ = host_run(tmp_path, site, '''
import json
try:
    epload.device('tfail')
    e = None
except epload.BackendError as err:
    e = str(err)
print('@@' + json.dumps(dict(e=e, warned=warned, npu=type(epload.device('tnpu')).__name__)))
''')
    assert got['warned'] == []  # declared: nothing ran at autoload
    assert "flaky" in got['e'] and 'simulated failure: the device is unplugged' in got['e']
    assert 'EPLOAD_DISABLE=flaky' in got['e']
    assert got['npu'] == 'NativeDevice'


def test_undeclared_native_backend_that_fails_is_warned_about_at_the_users_line(tmp_path):
    site = tmp_path / 'site'
    pkg = site / 'sym'
    install(site, 'sym', 'tb_undeclared')
    make_dist(str(site), 'sym', entry_points={GROUP: ['sym = sym._native:no_such_init']})
    got, _ = host_run(tmp_path, site, 'import json\nprint("@@" + json.dumps(dict(warned=warned)))')
    assert len(got['warned']) == 1, got
    message, at_line = got['warned'][0]
    assert "init symbol 'no_such_init' missing" in message and at_line


@pytest.mark.parametrize('python_first', [True, False])
def test_command_and_python_host_agree_in_either_order(tmp_path, python_first):
    site = tmp_path / 'site'
    install(site, 'npu', 'tb_npu')
    code = 'import json\nd = epload.device("tnpu")\nprint("@@" + json.dumps(dict(t=type(d).__name__)))'
    if python_first:
        got, _ = host_run(tmp_path, site, code)
        assert got['t'] == 'NativeDevice'
    loaded = json.loads(cli(tmp_path, site, 'load', 'tnpu', '--json', check=0).stdout)
    assert loaded['ok'] and loaded['backend'] == 'npu', loaded
    listing = json.loads(cli(tmp_path, site, 'devices', '--json', check=0).stdout)
    assert listing['backends'][0]['kind'] == 'native'
    # One store for both: the one file the Python run and the command wrote.
    assert len(list((tmp_path / 'cache').glob('learned-*.txt'))) == 1
    if not python_first:
        got, _ = host_run(tmp_path, site, code)
        assert got['t'] == 'NativeDevice'


def test_crash_in_init_is_shown_next_time_and_skipped_in_lazy_mode(tmp_path):
    site = tmp_path / 'site'
    install(site, 'crash', 'tb_crash')
    install(site, 'npu', 'tb_npu')
    _, proc = host_run(tmp_path, site, 'epload.device("tcrash")', check=False)
    assert proc.returncode == -11, proc.stderr  # SIGSEGV, in the init
    listing = cli(tmp_path, site, 'devices', check=0).stdout
    assert 'crashed 20' in listing, listing
    got, _ = host_run(tmp_path, site, '''
import json
try:
    epload.device('tcrash')
    e = None
except epload.BackendError as err:
    e = str(err)
print('@@' + json.dumps(dict(e=e, warned=warned, npu=type(epload.device('tnpu')).__name__)))
''')
    assert len(got['warned']) == 1 and got['warned'][0][1], got['warned']
    assert 'crashed in init at' in got['warned'][0][0] and 'EPLOAD_ENABLE' in got['warned'][0][0]
    assert 'crashed in init at' in got['e'] and got['npu'] == 'NativeDevice'
    # Named by EPLOAD_ENABLE: tried again (and it crashes again).
    proc = run_py(tmp_path, HOST + 'epload.device("tcrash")', pythonpath=[site],
                  env={'EPLOAD_ENABLE': 'crash'}, check=False)
    assert proc.returncode == -11, proc.stderr


def test_get_include_holds_the_backend_header(tmp_path):
    proc = run_py(tmp_path, 'import epload; print(epload.get_include())')
    include = pathlib.Path(proc.stdout.strip())
    assert include.is_relative_to(PACKAGE_DIR)
    assert (include / 'epload' / 'backend.h').read_bytes() == \
        (pathlib.Path(SOURCE_DIR) / 'include' / 'epload' / 'backend.h').read_bytes()

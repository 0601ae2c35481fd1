"""Only a fatal signal inside a backend's init is remembered as a crash.

A process that ends while one of its threads is inside an init (a normal
exit with a daemon thread there, sys.exit, SIGINT, SIGTERM, SIGHUP, SIGKILL)
leaves nothing: the next process loads the backend.  SIGSEGV, SIGBUS,
SIGILL, SIGFPE or SIGABRT in an init is recorded and lazy loading refuses
the backend next time; a fault handler installed before or after epload's
(faulthandler) still prints its traceback, and the process still dies by
the signal.  Python and native
backends, real interpreters, real signals."""

import json
import os
import shutil
import signal
import subprocess

import pytest

from pyfixtures import PYTHON, env_for, make_dist, write
from test_native_backends import BACKENDS, GROUP, HOST, SUFFIX, cli

# A Python backend whose entry point does what PYBLK says: block (after
# writing a byte to descriptor PYBLK_FD), segv (a real fault), abort, send
# its thread a signal (SIGBUS, ...), or succeed.
PY_BACKEND = '''
import os, sys

def init():
    what = os.environ.get("PYBLK", "")
    if what.startswith("faulthandler"):
        import faulthandler
        faulthandler.enable()
    if what == "block":
        import threading
        os.write(int(os.environ["PYBLK_FD"]), b"r")
        threading.Event().wait()
    if what.endswith("segv"):
        import ctypes
        ctypes.string_at(0)
    if what == "abort":
        os.abort()
    if what.startswith("SIG"):  # sent to this thread, as a library's raise() would
        import signal, threading
        signal.pthread_kill(threading.get_ident(), getattr(signal, what))
    sys.modules["myhost"].pyblk_loaded = True
'''


def site_with(tmp_path, kind):
    site = tmp_path / 'site'
    if kind == 'python':
        write(str(site / 'pyblk' / '__init__.py'), PY_BACKEND)
        make_dist(str(site), 'pyblk', entry_points={GROUP: ['pyblk = pyblk:init']})
    else:
        for dist, variant in (('blk', 'tb_block'), ('crash', 'tb_crash'), ('abrt', 'tb_abort')):
            pkg = site / dist
            pkg.mkdir(parents=True)
            (pkg / '__init__.py').write_text('')
            shutil.copyfile(BACKENDS / f'{variant}.so', pkg / ('_native' + SUFFIX))
            make_dist(str(site), dist, entry_points={GROUP: [f'{dist} = {dist}._native:tb_init']})
    return site


# The Python backend loads at autoload (its devices unknown); a native one
# at its device's first use.
LOAD = {'python': "epload.autoload('myhost.backends', host=host)",
        'native': "epload.autoload('myhost.backends', host=host); epload.device('tblock')"}

# Starts the load in a daemon thread, waits until its init runs, then ends
# as argv[1] says (or waits for the test's signal).
IN_THREAD = '''
import os, sys, threading, time, types
import epload
host = types.ModuleType('myhost')
sys.modules['myhost'] = host
r, w = os.pipe()
os.environ['PYBLK_FD'] = os.environ['EPLOAD_TB_BLOCK_FD'] = str(w)
def load():
    try:
        @LOAD@
    finally:
        os.write(w, b'-')  # not blocked in its init
threading.Thread(target=load, daemon=True).start()
print('@@in-init' if os.read(r, 1) == b'r' else '@@returned', flush=True)
if sys.argv[1] == 'sys.exit':
    sys.exit(3)
if sys.argv[1] == 'signal':
    while True:
        time.sleep(0.05)
'''

NEXT_RUN = HOST + '''
import json
try:
    t = type(@LOOKUP@).__name__
    e = None
except epload.BackendError as err:
    t, e = None, str(err)
print('@@' + json.dumps(dict(warned=warned, e=e, t=t, py=getattr(host, 'pyblk_loaded', False))))
'''


def next_run(tmp_path, site, lookup):
    """The next process: what autoload warned, and what `lookup` did."""
    proc = subprocess.run([PYTHON, '-c', NEXT_RUN.replace('@LOOKUP@', lookup)], env=env_for(tmp_path, pythonpath=[site]),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads([x for x in proc.stdout.splitlines() if x.startswith('@@')][-1][2:])


@pytest.mark.parametrize('kind', ['python', 'native'])
@pytest.mark.parametrize('ending', ['exit', 'sys.exit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'SIGKILL'])
def test_a_process_ending_during_an_init_is_no_crash(tmp_path, kind, ending):
    site = site_with(tmp_path, kind)
    code = IN_THREAD.replace('@LOAD@', LOAD[kind])
    env = env_for(tmp_path, pythonpath=[site], extra={'PYBLK': 'block'})
    proc = subprocess.Popen([PYTHON, '-c', code, 'signal' if ending.startswith('SIG') else ending],
                            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line == '@@in-init', (line, proc.communicate(timeout=120))
    if ending.startswith('SIG'):
        proc.send_signal(getattr(signal, ending))
    _, err = proc.communicate(timeout=120)
    if ending == 'exit':
        assert proc.returncode == 0, err
    elif ending == 'sys.exit':
        assert proc.returncode == 3, err
    elif ending != 'SIGINT':  # SIGINT is a KeyboardInterrupt first
        assert proc.returncode == -getattr(signal, ending), err
    got = next_run(tmp_path, site, 'None' if kind == 'python' else "epload.device('tblock')")
    assert got['warned'] == [] and got['e'] is None, got
    assert got['py'] is True if kind == 'python' else got['t'] == 'NativeDevice', got
    assert not list((tmp_path / 'cache').glob('learned-*.loading'))


@pytest.mark.parametrize('kind,what,sig', [('python', 'segv', signal.SIGSEGV), ('python', 'abort', signal.SIGABRT),
                                           ('python', 'SIGBUS', signal.SIGBUS), ('python', 'SIGILL', signal.SIGILL),
                                           ('python', 'SIGFPE', signal.SIGFPE),
                                           ('native', 'tcrash', signal.SIGSEGV),
                                           ('native', 'tabort', signal.SIGABRT)])
def test_a_fatal_signal_in_an_init_is_a_crash(tmp_path, kind, what, sig):
    site = site_with(tmp_path, kind)
    load = LOAD['python'] if kind == 'python' else f"epload.device({what!r})"  # after HOST's autoload
    proc = subprocess.run([PYTHON, '-c', HOST + load], env=env_for(tmp_path, pythonpath=[site], extra={'PYBLK': what}),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -sig, proc.stderr
    got = next_run(tmp_path, site, 'None' if kind == 'python' else load)
    assert got['warned'] and 'crashed in init at' in got['warned'][0][0], got
    assert 'EPLOAD_ENABLE' in got['warned'][0][0] and got['py'] is False, got
    if kind == 'native':
        assert got['e'] and 'crashed in init at' in got['e'], got


@pytest.mark.parametrize('kind,when', [('python', 'before'), ('python', 'after'), ('native', 'before')])
def test_faulthandler_still_reports_and_the_crash_is_recorded(tmp_path, kind, when):
    """Enabled before epload's handler (-X faulthandler) or after it (inside
    the init): its traceback on stderr, death by SIGSEGV, the crash known."""
    site = site_with(tmp_path, kind)
    load = LOAD['python'] if kind == 'python' else "epload.device('tcrash')"
    args = ['-X', 'faulthandler'] if when == 'before' else []
    pyblk = 'segv' if when == 'before' else 'faulthandler+segv'
    proc = subprocess.run([PYTHON, *args, '-c', HOST + load],
                          env=env_for(tmp_path, pythonpath=[site], extra={'PYBLK': pyblk}),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    assert 'Fatal Python error: Segmentation fault' in proc.stderr, proc.stderr
    listing = cli(tmp_path, site, 'devices', '--json', check=0)
    backends = {b['backend']: b for b in json.loads(listing.stdout)['backends']}
    name = 'pyblk' if kind == 'python' else 'crash'
    assert backends[name]['crashed_at'].startswith('20'), backends[name]

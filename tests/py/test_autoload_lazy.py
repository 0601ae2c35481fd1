"""epload.autoload in lazy mode: nothing imported at `import host` once devices
are known; exactly the needed backend at the first lookup; init once under
16 threads; failures never break `import host` and surface, with the backend's
name, cause and remedy, at the first lookup.  Every run is a fresh interpreter.
"""

import json
import os
import subprocess

import pytest

from pyfixtures import BUILD_DIR, HOST_STYLES, PYTHON, env_for, make_backend, make_host, run_py, write

HOST_STYLES.setdefault('epload-auto', '''
import epload
epload.autoload(group="torch.backends", host=__name__)
''')

# Prints what `import fakehost` imported (backend modules, heavy modules) and
# the backend events so far; then runs BODY; then prints STATE as JSON.
RUN = '''
import sys
before = set(sys.modules)
import fakehost
state = {{
    "at_import": sorted(m for m in set(sys.modules) - before if m.startswith("be_")),
    "heavy": sorted(m for m in ("importlib.metadata", "email", "zipfile", "pathlib", "json", "re")
                    if m in sys.modules and m not in before),
    "events_at_import": [list(e) for e in fakehost._events],
}}
import epload
{body}
state["events"] = [list(e) for e in fakehost._events]
state["imported"] = sorted(m for m in set(sys.modules) - before if m.startswith("be_"))
import json  # only now: it imports re
print(json.dumps(state))
'''


class Env:
    """A host plus backends in separate site directories (so that discovery
    order is the order of creation), run in fresh interpreters that share
    one cache directory."""

    def __init__(self, tmp_path, style='epload-lazy'):
        self.tmp_path = tmp_path
        self.host_dir = tmp_path / 'hostdir'
        make_host(self.host_dir, style)
        self.sites = []

    def backend(self, name, kind='normal', **kw):
        site = self.tmp_path / f'site{len(self.sites)}'
        self.sites.append(site)
        return make_backend(site, name, kind, **kw)

    def run(self, body='', env=None, check=True):
        code = RUN.format(body=body)
        proc = run_py(self.tmp_path, code, pythonpath=[self.host_dir, *self.sites], env=env,
                      check=check)
        if check:
            state = json.loads(proc.stdout.strip().splitlines()[-1])
            state['stderr'] = proc.stderr
            return state
        return proc


def test_devices_are_learned_then_nothing_is_imported_at_start(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a')
    env.backend('be_b', devices=('gpu2', 'gpu3'))
    first = env.run()
    assert first['at_import'] == ['be_a', 'be_b']  # unknown devices: loaded at once
    second = env.run('''
dev = fakehost.gpu3
state["after_b"] = sorted(m for m in sys.modules if m.startswith("be_"))
state["same"] = dev is fakehost.gpu3 and dev.__name__ == "be_b.gpu3"
import epload._autoload as A
s = A._session_order[0]
state["store"] = os.path.basename(s.loader.store_file())
'''.replace("import epload._autoload", "import os, epload._autoload"))
    assert second['at_import'] == [] and second['events_at_import'] == []
    assert second['heavy'] == []
    assert second['after_b'] == ['be_b']
    assert second['events'] == [['import', 'be_b'], ['call', 'be_b']]
    assert second['same'] is True
    # The core's learned-devices store, the one `epload devices` reads.
    assert second['store'].startswith('learned-') and second['store'].endswith('.txt')


def test_declared_devices_are_lazy_from_the_first_run(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a', declare=True)
    env.backend('be_b', declare=True)
    out = env.run('state["dev"] = fakehost.be_adev.__name__')
    assert out['at_import'] == [] and out['heavy'] == []
    assert out['dev'] == 'be_a.be_adev'
    assert out['imported'] == ['be_a']


def test_device_and_load_functions(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a', declare=True)
    env.backend('be_b', declare=True)
    out = env.run('''
state["device"] = epload.device("be_bdev").__name__
state["after_device"] = sorted(m for m in sys.modules if m.startswith("be_"))
epload.load("be_a")
try:
    epload.device("nodev")
except LookupError as e:
    state["missing"] = [type(e).__name__, str(e)]
try:
    epload.load("nobackend")
except LookupError as e:
    state["nobackend"] = str(e)
state["backends"] = [(b.name, b.state, list(b.devices), b.source) for b in epload.backends()]
''')
    assert out['device'] == 'be_b.be_bdev' and out['after_device'] == ['be_b']
    assert out['imported'] == ['be_a', 'be_b']
    assert out['missing'] == ['DeviceNotFoundError',
                              "no backend provides device 'nodev'; known devices: be_adev, be_bdev"]
    assert "no backend named 'nobackend'" in out['nobackend']
    assert out['backends'] == [['be_a', 'ready', ['be_adev'], 'declared'],
                               ['be_b', 'ready', ['be_bdev'], 'declared']]


def test_sixteen_threads_looking_up_one_device_run_its_init_once(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a', declare=True, delay=0.3)
    out = env.run('''
import threading
barrier = threading.Barrier(16)
got = []
def look(i):
    barrier.wait()
    got.append(fakehost.be_adev if i % 2 else epload.device("be_adev"))
threads = [threading.Thread(target=look, args=(i,)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
state["results"] = len(got)
state["distinct"] = len({id(g) for g in got})
state["inits"] = fakehost._init_counts
''')
    assert out['results'] == 16 and out['distinct'] == 1
    assert out['inits'] == {'be_a': 1}


@pytest.mark.parametrize('kind,cause', [
    ('import-error', 'ImportError'),
    ('missing-attr', 'AttributeError'),
    ('not-callable', 'TypeError'),
    ('raises', 'ValueError'),
])
def test_broken_backend_does_not_break_import_host(tmp_path, kind, cause):
    env = Env(tmp_path)
    env.backend('be_bad', kind, declare=True)
    env.backend('be_ok', declare=True)
    out = env.run('''
errors = []
for attempt in range(2):
    try:
        fakehost.be_baddev
    except AttributeError as e:
        errors.append([type(e).__name__, isinstance(e, RuntimeError), isinstance(e, epload.BackendError),
                       str(e), type(e.__cause__).__name__])
state["errors"] = errors
state["hasattr"] = hasattr(fakehost, "be_baddev")
state["ok"] = fakehost.be_okdev.__name__
try:
    epload.load("be_bad")
except epload.BackendError as e:
    state["load"] = [str(e), type(e.__cause__).__name__]
''')
    assert out['at_import'] == [] and out['stderr'] == ''
    assert len(out['errors']) == 2 and out['errors'][0] == out['errors'][1]
    name, is_runtime, is_backend, text, cause_name = out['errors'][0]
    assert is_runtime and is_backend and cause_name == cause
    assert text.startswith("Device 'be_baddev' of module 'fakehost' is unavailable: "
                           "Failed to load the backend extension: be_bad ('be_bad:_autoload' from ")
    assert text.endswith('You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0, '
                         'or this backend alone with EPLOAD_DISABLE=be_bad.')
    assert out['hasattr'] is False
    assert out['ok'] == 'be_ok.be_okdev'
    assert out['load'][1] == cause and 'be_bad' in out['load'][0]
    # Sticky: the backend was tried once.
    calls = [e for e in out['events'] if e[1] == 'be_bad']
    assert len([e for e in calls if e[0] == 'import']) <= 1
    assert len([e for e in calls if e[0] == 'call']) <= 1


def test_broken_backend_with_unknown_devices_warns_and_raises_on_load(tmp_path):
    env = Env(tmp_path)
    env.backend('be_bad', 'raises')
    env.backend('be_ok')
    out = env.run('''
try:
    epload.load("be_bad")
except epload.BackendError as e:
    state["load"] = [str(e), repr(e.__cause__)]
try:
    fakehost.anything
except AttributeError as e:
    state["attr"] = [str(e), repr(e.__cause__), isinstance(e, RuntimeError), e.name]
''')
    assert out['at_import'] == ['be_bad', 'be_ok']
    # The failure of the backend that may provide it, as PyTorch's is a RuntimeError.
    assert out['attr'][2:] == [True, 'anything']
    assert 'RuntimeWarning: Failed to load the backend extension: be_bad' in out['stderr']
    assert out['load'][1] == "ValueError('be_bad: no device found')"
    assert out['attr'][0].startswith("module 'fakehost' has no attribute 'anything' "
                                     "(backends whose devices are unknown failed to load, one of "
                                     "them may provide it: 'be_bad' (ValueError: be_bad: no device "
                                     "found)")
    # be_ok was learned; be_bad was not (it is tried again next time).
    again = env.run()
    assert again['at_import'] == ['be_bad']


def test_hooks_run_at_once_in_every_run(tmp_path):
    env = Env(tmp_path)
    env.backend('be_hook', devices=())
    env.backend('be_a')
    env.run()
    out = env.run()
    assert out['at_import'] == ['be_hook']
    assert out['events_at_import'] == [['import', 'be_hook'], ['call', 'be_hook']]


@pytest.mark.parametrize('variables,loaded', [
    ({'TORCH_DEVICE_BACKEND_AUTOLOAD': '0'}, []),
    ({'TORCH_DEVICE_BACKEND_AUTOLOAD': 'true'}, []),
    ({'EPLOAD_AUTOLOAD': '0'}, []),
    ({'EPLOAD_DISABLE': 'be_a'}, ['be_b']),
    ({'EPLOAD_DISABLE': ' be_b , other'}, ['be_a']),
    ({'EPLOAD_ENABLE': 'be_b'}, ['be_b']),
    ({'EPLOAD_ENABLE': ''}, ['be_a', 'be_b']),
])
def test_switches(tmp_path, variables, loaded):
    env = Env(tmp_path)
    env.backend('be_a', declare=True)
    env.backend('be_b', declare=True)
    out = env.run('''
for d in ("be_adev", "be_bdev"):
    try:
        getattr(fakehost, d)
    except AttributeError as e:
        state.setdefault("missing", []).append(str(e))
from epload import _native
state["disabled_by"] = {b.name: b.disabled_by for b in epload.backends()}
state["typed"] = all(isinstance(b._status().state, _native.State)
                     and (b._status().state == _native.State.disabled) == (b.state == "disabled")
                     for b in epload.backends())
''', env=variables)
    assert out['at_import'] == []
    assert out['imported'] == loaded
    for message in out.get('missing', []):
        if 'EPLOAD_DISABLE' in variables or 'EPLOAD_ENABLE' in variables:
            assert 'is disabled by EPLOAD_' in message
    # Which switch disabled a backend is a field of its status.
    switch = next((v for v in ('EPLOAD_DISABLE', 'EPLOAD_ENABLE') if variables.get(v, '').strip()), None)
    if 'EPLOAD_AUTOLOAD' not in variables and 'TORCH_DEVICE_BACKEND_AUTOLOAD' not in variables:
        assert out['disabled_by'] == {n: None if n in loaded else switch for n in ('be_a', 'be_b')}
        assert out['typed'] is True


def test_mode_comes_from_the_environment_when_not_given(tmp_path):
    env = Env(tmp_path, style='epload-auto')
    env.backend('be_a', declare=True)
    assert env.run()['at_import'] == []
    assert env.run(env={'EPLOAD_MODE': 'eager'})['at_import'] == ['be_a']
    assert env.run(env={'EPLOAD_MODE': 'off'})['imported'] == []
    # A bad value is a warning naming the variable and the accepted values,
    # and the default (lazy) applies: never a failed `import host`.
    out = env.run(env={'EPLOAD_MODE': 'sometimes'})
    assert out['at_import'] == []
    assert ("RuntimeWarning: EPLOAD_MODE='sometimes' is not one of lazy, eager, off: using lazy"
            in out['stderr'])


def test_eager_mode_learns_for_the_next_lazy_run(tmp_path):
    env = Env(tmp_path, style='epload-auto')
    env.backend('be_a')
    env.backend('be_b')
    assert env.run(env={'EPLOAD_MODE': 'eager'})['at_import'] == ['be_a', 'be_b']
    out = env.run('fakehost.be_bdev')
    assert out['at_import'] == [] and out['imported'] == ['be_b']


def test_reinstalled_backend_is_learned_again(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a', devices=('old',))
    env.run()
    assert env.run()['at_import'] == []
    # Reinstall with other devices: a new entry_points.txt (new inode).
    site = env.sites[0]
    dist = site / 'be_a-1.0.dist-info'
    os.unlink(dist / 'entry_points.txt')
    make_backend(site, 'be_a', devices=('new',))
    # The core's rule: what the store says of a backend is checked against
    # its module file when it is about to load, or when a lookup finds no
    # provider (then the changed backends load): the new name is found and
    # learned, the backend loaded once.
    out = env.run('state["new"] = fakehost.new.__name__')
    assert out['at_import'] == [] and out['new'] == 'be_a.new'
    assert out['events'] == [['import', 'be_a'], ['call', 'be_a']]
    out = env.run('state["new"] = fakehost.new.__name__')
    assert out['at_import'] == [] and out['imported'] == ['be_a']


def store_of(tmp_path):
    """The learned-devices store (the core's file, src/loader/learned.cpp)."""
    found = [n for n in os.listdir(tmp_path / 'cache') if n.startswith('learned-')]
    assert len(found) == 1, found
    return tmp_path / 'cache' / found[0]


@pytest.mark.parametrize('content,mode', [
    ('cut', 0o600),                     # truncated: no trailer
    ('not a store at all\n', 0o600),
    ('epload-learned 99\nend 0\n', 0o600),
    ('epload-learned 4\nend 0\n', 0o600),  # an older version: its facts are not trusted
    ('epload-learned 5\nend 0\n', 0o600),  # valid, knows nothing
    (None, 0o666),  # a valid store others can write: not trusted
])
def test_bad_store_means_learning_again(tmp_path, content, mode):
    env = Env(tmp_path)
    env.backend('be_a')
    env.run()
    store = store_of(tmp_path)
    assert env.run()['at_import'] == []
    if content == 'cut':
        text = store.read_text()
        write(str(store), text[:text.index('\nend ')])
    elif content is not None:
        write(str(store), content)
    os.chmod(store, mode)
    assert env.run()['at_import'] == ['be_a']


def test_fifo_in_place_of_the_store_does_not_hang(tmp_path):
    """Opening a FIFO for reading waits for a writer: the store reader must
    not (the run has a timeout), and must learn again as for any bad store."""
    env = Env(tmp_path)
    env.backend('be_a')
    env.run()
    store = store_of(tmp_path)
    assert env.run()['at_import'] == []
    store.unlink()
    os.mkfifo(store, 0o600)
    assert env.run()['at_import'] == ['be_a']
    assert store.is_file()


def test_store_is_never_written_into_a_directory_others_can_write(tmp_path):
    """Like the native writers (atomic_file.hpp, make_safe_dir): a cache
    directory writable by group or others is not written into; the
    backends are found by loading them, each run, and work the same."""
    cache = tmp_path / 'cache'
    cache.mkdir()
    os.chmod(cache, 0o770)
    env = Env(tmp_path)
    env.backend('be_a')
    for _ in range(2):
        out = env.run(env={'EPLOAD_DEBUG': '1'})
        assert out['at_import'] == ['be_a']  # nothing remembered: learned again
        assert 'is writable by group or others (mode 770)' in out.get('stderr', ''), out
    assert os.listdir(cache) == []
    os.chmod(cache, 0o700)
    env.run()
    assert store_of(tmp_path).is_file()
    assert env.run()['at_import'] == []


def test_store_write_leaves_nothing_behind_and_index_clear_removes_it(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a')
    env.run()
    cache = tmp_path / 'cache'
    store = store_of(tmp_path).name
    # The store was written through a temporary file, renamed into place.
    assert store in os.listdir(cache)
    assert not [n for n in os.listdir(cache) if '.tmp.' in n]
    # A temporary file of a killed writer is one `index clear` knows.
    write(str(cache / f'.{store}.tmp.123.456'), 'epload-learned 3\n')
    write(str(cache / 'notes.txt'), 'not ours')
    proc = subprocess.run([os.path.join(BUILD_DIR, 'epload'), 'index', 'clear', '--path', str(tmp_path),
                           '--cache-dir', str(cache)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(cache)) == ['notes.txt']
    assert env.run()['at_import'] == ['be_a']  # learned again


def test_backend_importing_the_host_and_backend_imported_first(tmp_path):
    env = Env(tmp_path)
    env.backend('be_c', 'circular', declare=True)
    env.backend('be_x', 'callable-first', declare=True)
    out = env.run('state["c"] = fakehost.be_cdev.__name__')
    assert out['at_import'] == [] and out['c'] == 'be_c.be_cdev'
    # Imported explicitly before the host: the host's autoload sees it mid-import.
    proc = run_py(tmp_path, '''
import json, sys
import be_x, be_c
import fakehost
calls = lambda: sorted(e[1] for e in fakehost._events if e[0] == "call")
print(json.dumps([fakehost.be_xdev.__name__, fakehost.be_cdev.__name__, calls()]))
''', pythonpath=[env.host_dir, *env.sites])
    x, c, counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (x, c) == ('be_x.be_xdev', 'be_c.be_cdev') and counts == ['be_c', 'be_x']


def test_circular_backend_with_unknown_devices_imported_first(tmp_path):
    # PyTorch fails here (the callable is not defined yet when the host's loop
    # runs); lazy mode retries at the first lookup instead.
    env = Env(tmp_path)
    env.backend('be_c', 'circular')
    proc = run_py(tmp_path, '''
import json
import be_c
import fakehost
print(json.dumps([fakehost.be_cdev.__name__, [e for e in fakehost._events if e[0] == "call"]]))
''', pythonpath=[env.host_dir, *env.sites])
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ['be_c.be_cdev', [['call', 'be_c']]]
    assert proc.stderr == ''


def test_a_lookup_from_inside_an_init_loads_no_other_backend(tmp_path):
    # A host's hasattr probe made by a backend's init (torch's
    # _register_device_module does one) of a name no backend is known to
    # provide is "not there yet": no other backend runs in the middle of this
    # one; after it, the other one loads and provides the name.
    env = Env(tmp_path)
    env.backend('be_a')
    env.backend('be_b')
    write(env.sites[0] / 'be_a' / '__init__.py', """
import types
import fakehost as _h
_h._events.append(("import", "be_a"))

def _autoload():
    _h._events.append(("call", "be_a"))
    _h._events.append(("probe", hasattr(_h, "be_bdev"), hasattr(_h, "nowhere")))
    _h._register_device_module("be_adev", types.ModuleType("be_a.be_adev"))
""")
    out = env.run('state["b"] = fakehost.be_bdev.__name__')
    assert out['events_at_import'] == [['import', 'be_a'], ['call', 'be_a'], ['probe', False, False],
                                       ['import', 'be_b'], ['call', 'be_b']]
    assert out['b'] == 'be_b.be_bdev'


def test_existing_module_getattr_is_chained(tmp_path):
    HOST_STYLES['chained'] = '''
def __getattr__(name):
    if name == "legacy":
        return 42
    raise AttributeError(f"custom: no {name}")

import epload
epload.autoload(group="torch.backends", host=__name__, mode="lazy")
'''
    env = Env(tmp_path, style='chained')
    env.backend('be_a', declare=True)
    out = env.run('''
state["legacy"] = fakehost.legacy
state["dev"] = fakehost.be_adev.__name__
try:
    fakehost.nothing
except AttributeError as e:
    state["error"] = str(e)
''')
    assert out['legacy'] == 42 and out['dev'] == 'be_a.be_adev'
    assert out['error'] == 'custom: no nothing'


def test_autoload_is_idempotent_per_host(tmp_path):
    env = Env(tmp_path)
    env.backend('be_a')
    out = env.run('''
s1 = epload.autoload(group="torch.backends", host="fakehost", mode="lazy")
s2 = epload.autoload(group="torch.backends", host=fakehost, mode="eager")
state["same"] = s1 is s2
state["inits"] = fakehost._init_counts
''')
    assert out['same'] is True and out['inits'] == {'be_a': 1}


def test_bad_arguments(tmp_path):
    proc = run_py(tmp_path, '''
import epload
for kw in ({"mode": "lazy"}, {"host": 3, "mode": "eager"}, {"mode": "never", "host": "os"}):
    try:
        epload.autoload(**kw)
    except (TypeError, ValueError) as e:
        print(type(e).__name__, e)
''')
    assert proc.stdout.splitlines() == [
        'ValueError lazy autoload needs a host module to register devices on: pass host=__name__ from the '
        'host package (or host=<module>), or mode="eager"',
        'TypeError host must be a module or a module name, not int',
        "ValueError autoload mode must be one of lazy, eager, off, not 'never' (argument mode=)",
    ]


# A backend that replaces a device another backend registered, adds one of
# its own, sets a private name and imports a submodule of the host.
REPLACING = '''
import sys, types, importlib

def _autoload():
    import fakehost as host
    host._events.append(("call", "be_r"))
    host.be_adev = types.ModuleType("be_r.replaced")   # replaced, not added
    host._scratch = 1                                  # private
    importlib.import_module("fakehost.sub")            # a submodule of the host
    host._register_device_module("be_rdev", types.ModuleType("be_r.be_rdev"))
'''

# A backend that deletes a name the host had before it ran.
DELETING = '''
import types

def _autoload():
    import fakehost as host
    host._events.append(("call", "be_d"))
    host.__dict__.pop("be_adev", None)
    host._register_device_module("be_ddev", types.ModuleType("be_d.be_ddev"))
'''


def test_each_backend_learns_exactly_what_it_added(tmp_path):
    env = Env(tmp_path, style='epload-auto')
    write(str(env.host_dir / 'fakehost' / 'sub.py'), '')
    env.backend('be_a')
    env.backend('be_r')
    write(str(env.sites[-1] / 'be_r' / '__init__.py'), REPLACING)
    env.backend('be_c', devices=('c1', 'c2'))
    show = 'state["devices"] = [(b.name, b.devices, b.source) for b in epload.backends()]'
    first = env.run(show, env={'EPLOAD_MODE': 'eager'})
    assert first['devices'] == [['be_a', ['be_adev'], 'learned'],
                                ['be_r', ['be_rdev'], 'learned'],
                                ['be_c', ['c1', 'c2'], 'learned']]
    out = env.run('state["c"] = fakehost.c2.__name__; ' + show, env={'EPLOAD_MODE': 'lazy'})
    assert out['at_import'] == [] and out['imported'] == ['be_c'] and out['c'] == 'be_c.c2'
    assert out['devices'] == first['devices']


def test_backend_deleting_a_host_name_is_not_learned(tmp_path):
    # What a backend that deletes an older name added cannot be told from the
    # end of the host's dict; it stays unknown and is loaded at every start.
    env = Env(tmp_path, style='epload-auto')
    env.backend('be_a')
    env.backend('be_d')
    write(str(env.sites[-1] / 'be_d' / '__init__.py'), DELETING)
    show = 'state["devices"] = [(b.name, b.devices) for b in epload.backends()]'
    first = env.run(show, env={'EPLOAD_MODE': 'eager'})
    assert first['devices'] == [['be_a', ['be_adev']], ['be_d', None]]
    out = env.run(show, env={'EPLOAD_MODE': 'lazy'})
    assert out['at_import'] == ['be_d'] and out['devices'][0] == ['be_a', ['be_adev']]


def test_store_keys_with_escapes_and_non_ascii_are_read_back(tmp_path):
    # The store's keys hold the distribution path: quotes, backslashes and
    # non-ASCII characters in it must survive json.dumps and the native reader.
    env = Env(tmp_path)
    site = tmp_path / 'sité "q" \\ ✓'
    env.sites.append(site)
    make_backend(site, 'be_a')
    assert env.run()['at_import'] == ['be_a']
    out = env.run('state["dev"] = fakehost.be_adev.__name__')
    assert out['at_import'] == [] and out['dev'] == 'be_a.be_adev'


def test_a_probe_learns_devices_of_another_kind_and_the_cli_lists_them(tmp_path):
    # What the PyTorch front does for PrivateUse1: a probe around each load
    # reports a device that is not a host attribute, with its kind; it is
    # learned in the core's store, and `epload devices` lists it.
    HOST_STYLES['probed'] = '''
import epload, epload._autoload as A
def _probe(token):
    if token is None:
        return len(_events)
    return [("pu1_" + e[1], "privateuse1") for e in _events[token:] if e[0] == "call"]
import types
A.fronts[("torch.backends", __name__)] = types.SimpleNamespace(probe=_probe)
epload.autoload(group="torch.backends", host=__name__)
'''
    env = Env(tmp_path, style='probed')
    env.backend('be_a')
    env.run()
    out = env.run('state["b"] = [(b.name, list(b.devices), list(b.kinds)) for b in epload.backends()]')
    assert out['at_import'] == []
    assert out['b'] == [['be_a', ['be_adev', 'pu1_be_a'], ['attr', 'privateuse1']]]
    proc = subprocess.run([os.path.join(BUILD_DIR, 'epload'), 'devices', '--json', '--python', PYTHON],
                          env=env_for(tmp_path, pythonpath=[env.host_dir, *env.sites]),
                          cwd=str(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    listed = {d['device']: (d['backend'], d['how'], d['kind']) for d in json.loads(proc.stdout)['devices']}
    assert listed == {'be_adev': ('be_a', 'learned', 'attr'), 'pu1_be_a': ('be_a', 'learned', 'privateuse1')}


def test_an_unusable_cache_directory_is_said_once_and_backends_still_load(tmp_path):
    """A cache directory that cannot be made (here: under a regular file,
    which stops root too) means nothing is remembered and every start
    imports every backend whose devices are not declared: a warning says so,
    naming the directory, once per process."""
    blocker = tmp_path / 'a-file'
    blocker.write_text('')
    env = Env(tmp_path)
    env.backend('be_a')
    env.backend('be_b')
    for _ in range(2):
        out = env.run('state["dev"] = fakehost.be_adev is not None',
                      env={'EPLOAD_CACHE_DIR': str(blocker / 'cache'), 'PYTHONWARNINGS': 'default'})
        assert out['at_import'] == ['be_a', 'be_b']  # nothing remembered: loaded each start
        warnings = [line for line in out['stderr'].splitlines() if 'RuntimeWarning' in line]
        assert len(warnings) == 1, out['stderr']
        assert str(blocker / 'cache') in warnings[0] and 'EPLOAD_CACHE_DIR' in warnings[0]
        assert 'cannot be remembered' in warnings[0]


def test_two_backends_declaring_one_device_are_warned_about_at_import_naming_both(tmp_path):
    # The first in discovery order wins; the hook says so at `import host`,
    # naming both, before anything is loaded.
    env = Env(tmp_path)
    env.backend('be_a', devices=('shared',), declare=True)
    env.backend('be_b', devices=('shared',), declare=True)
    out = env.run('state["dev"] = fakehost.shared.__name__')
    assert out['at_import'] == []
    assert out['dev'] == 'be_a.shared' and out['imported'] == ['be_a']
    clash = [line for line in out['stderr'].splitlines() if "device 'shared' is also provided by" in line]
    assert len(clash) == 1, out['stderr']
    assert "'be_a'" in clash[0] and "'be_b'" in clash[0], clash
    assert 'RuntimeWarning' in clash[0]


def test_a_declared_device_that_is_pytorchs_own_type_is_warned_and_never_answered_by_another(tmp_path):
    # In PyTorch's group, a backend declaring "xpu" is never consulted for it
    # under torch: the hook warns at `import host`, and epload.device("xpu")
    # raises rather than return the host's own object of that name.
    env = Env(tmp_path)
    env.backend('be_x', devices=('xpu',), declare=True)
    out = env.run('''
fakehost.xpu = "the host's own"
try:
    epload.device("xpu")
    state["device"] = None
except epload.BackendError as e:
    state["device"] = str(e)
''')
    warned = [line for line in out['stderr'].splitlines() if "PyTorch's own device type 'xpu'" in line]
    assert len(warned) == 1 and "'be_x'" in warned[0], out['stderr']
    assert out['device'] is not None and "PyTorch's own" in out['device'], out

"""Autoload of Python backends declared as entry points: eager, lazy or off.

A *backend* is one entry point of the autoload group (``torch.backends`` by
default) whose value names a callable, PyTorch's contract: loading it means
``ep.load()()``.  Backends register *devices* on a *host* module (``torch.npu``
after ``torch_npu`` ran).  Modes:

* ``eager``: PyTorch's loop (discovery order, import then call, the first
  failure raises RuntimeError with PyTorch's text, chained from the cause).
* ``lazy``: a backend whose devices are known is not imported until the
  first ``host.<device>``, ``epload.device(<device>)`` or
  ``epload.load(<backend>)``.  Devices are known from a declaration (group
  ``epload.devices`` of the backend's own distribution: ``<device> =
  <backend entry-point name>``) or were learned (the public attributes a
  backend added to its host on an earlier load, kept in
  ``<cache dir>/devices-<group>-<host>.json`` and forgotten when the backend's distribution
  changes: its ``entry_points.txt`` is rewritten on every install).  A backend with no known devices is loaded at once and
  its devices learned; a backend that registers none is a *hook* and runs at
  once.  A failure never breaks ``import host``: it is recorded, warned about,
  and raised at the first lookup that needs the backend.
* ``off``: nothing.

Every backend is a small state machine (unloaded -> loading -> ready |
failed) behind its own lock: concurrent lookups run its init exactly once, no
lock shared between backends is held while one imports, and a lookup made by
the backend's own init (or an import cycle through the host) returns "not
there yet" instead of deadlocking.  Failures are sticky for the process.

Switches: ``TORCH_DEVICE_BACKEND_AUTOLOAD`` (group torch.backends) and
``EPLOAD_AUTOLOAD`` (every group) -- unset or exactly ``1`` enables, anything
else turns autoload off; ``EPLOAD_DISABLE=a,b`` skips the named backends,
``EPLOAD_ENABLE=a,b`` loads only those; ``EPLOAD_MODE`` is the mode when the
caller gives none.
"""

import _thread
import os
import sys

from . import _entry_points as _eps
from . import _trace

TORCH_GROUP = 'torch.backends'
DEVICES_GROUP = 'epload.devices'
MODES = ('lazy', 'eager', 'off')

_STORE_FORMAT = 'epload-devices'
_STORE_VERSION = 1
_MISSING = object()
_DEFERRED = 'deferred'
_ModuleType = type(sys)


class BackendError(RuntimeError):
    """A backend failed to load; ``__cause__`` is what it raised."""


class _BackendAttributeError(BackendError, AttributeError):
    """Raised by ``host.<device>`` when the device's backend failed: an
    AttributeError too, so ``hasattr(host, device)`` stays False instead of
    raising."""


class DeviceNotFoundError(LookupError):
    """No backend provides the device."""


_lock = _thread.allocate_lock()  # the registries below; never held while importing
# thread id -> how many backend inits it is running: a lookup of an unknown
# name made from inside an init (torch._register_device_module's hasattr)
# loads no other backend, which would run in the middle of this one.
_loading_depth = {}
_sessions = {}  # (group, host name, id(host)) -> Session
_session_order = []


# ---- switches ---------------------------------------------------------------

def _switch_off(group):
    """The variable that turns autoload off for ``group``, or None."""
    if group == TORCH_GROUP and os.getenv('TORCH_DEVICE_BACKEND_AUTOLOAD', '1') != '1':
        return 'TORCH_DEVICE_BACKEND_AUTOLOAD'
    if os.getenv('EPLOAD_AUTOLOAD', '1') != '1':
        return 'EPLOAD_AUTOLOAD'
    return None


def _names(variable):
    value = os.environ.get(variable)
    if value is None:
        return None
    names = {n.strip() for n in value.split(',')}
    names.discard('')
    return names


def _disabled_by(name, disable, enable):
    if disable is not None and name in disable:
        return 'EPLOAD_DISABLE'
    if enable and name not in enable:
        return 'EPLOAD_ENABLE'
    return None


def _how_to_disable(group, name):
    if group == TORCH_GROUP:
        return ('You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0, '
                f'or this backend alone with EPLOAD_DISABLE={name}.')
    return (f'You can disable autoloading of {group!r} with EPLOAD_AUTOLOAD=0, '
            f'or this backend alone with EPLOAD_DISABLE={name}.')


def _pytorch_message(group, name):
    if group == TORCH_GROUP:
        return (f"Failed to load the backend extension: {name}. "
                f"You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.")
    return (f"Failed to load the backend extension: {name}. "
            f"You can disable extension auto-loading with EPLOAD_AUTOLOAD=0.")


# ---- the learned-device store -------------------------------------------------

def _file_part(text):
    return ''.join(c if c.isascii() and (c.isalnum() or c in '._-') else '_' for c in text)


class _Store:
    """What was learned for one (group, host): the file
    ``<cache dir>/devices-<group>-<host>.json`` holding
    ``{"format": "epload-devices", "version": 1, "group": G, "host": H,
    "backends": {"<name>\\u001f<value>\\u001f<dist dir>": [stamp, device...]}}``.
    Read natively (no ``json`` import at start-up); written with ``json``
    only when something new was learned."""

    def __init__(self, group, host):
        self.group = group
        self.host = host
        self._entries = None  # read on first use: match() needs no dict
        self.updates = {}
        try:
            directory = _eps._native_module().default_cache_dir()
        except Exception:  # no usable cache directory: learn every time
            directory = ''
        self.path = None
        if directory and host:
            self.path = os.path.join(directory, f'devices-{_file_part(group)}-{_file_part(host)}.json')

    @property
    def entries(self):
        """The store's backends as a dict (key -> [stamp, device...])."""
        if self._entries is None:
            self._entries = self._read() if self.path else {}
        return self._entries

    def _ours(self, data):
        """True when the top level of a store document is one of ours for
        this group and host (its "backends" is checked by the caller)."""
        return (type(data) is dict and data.get('format') == _STORE_FORMAT
                and data.get('version') == _STORE_VERSION and data.get('group') == self.group
                and data.get('host') == self.host)

    def _read(self):
        data = _eps._native_module().read_store(self.path)
        if not self._ours(data) or type(data.get('backends')) is not dict:
            return {}
        return data['backends']

    def match(self, rows, dists):
        """The discovery loop against the stored entries, natively, without
        building the dict: (known, device_map, unknown, at_start, restat) as
        for ``entries`` (see _native.match_store), or None when the store is
        missing or not usable (then ``entries`` is empty)."""
        if not self.path:
            return None
        got = _eps._native_module().match_store(self.path, rows, dists)
        if got is None or not self._ours(got[0]) or got[1] is None:
            self._entries = {}
            return None
        return got[1]

    def learn(self, key, stamp, devices):
        entry = [stamp, *devices]
        with _lock:
            if self.entries.get(key) == entry:
                return
            self.entries[key] = entry
            self.updates[key] = entry

    def save(self):
        with _lock:
            updates, self.updates = self.updates, {}
        if not updates or not self.path:
            return
        import json
        directory = os.path.dirname(self.path)
        # The temporary name is one `epload index clear` and the pruning of
        # stale temporary files know (src/cache_files.hpp).
        tmp = os.path.join(directory, f'.{os.path.basename(self.path)}.tmp.'
                                      f'{os.getpid()}.{_thread.get_ident()}')
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            # Never into a directory another user could write (its paths
            # decide what is imported): as the native writers (make_safe_dir).
            st = os.stat(directory)
            unsafe = (f'owned by uid {st.st_uid}, not by uid {os.geteuid()}' if st.st_uid != os.geteuid()
                      else f'writable by group or others (mode {st.st_mode & 0o777:o})'
                      if st.st_mode & 0o022 else '')
            if unsafe:
                _eps._debug(f'not writing {self.path}: unsafe: cache directory {directory} is {unsafe} '
                            '(devices will be learned again)')
                return
            entries = self._read()  # merge with what other processes learned
            entries.update(updates)
            text = json.dumps({'format': _STORE_FORMAT, 'version': _STORE_VERSION,
                               'group': self.group, 'host': self.host, 'backends': entries},
                              separators=(',', ':'), sort_keys=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, 'w', encoding='utf-8') as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError as err:
            _eps._debug(f'cannot write {self.path}: {err} (devices will be learned again)')
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _added(host, host_name, size, last):
    """The public names added to ``host`` since its ``__dict__`` had ``size``
    keys, the last being ``last``: the keys after ``last`` (new keys go to
    the end of a dict), except names starting with ``_`` and the host's own
    submodules imported on the way.  None when it cannot be told cheaply
    (``last`` was deleted, or an older key was: a key deleted and set again
    moves to the end too and would look new): then nothing is learned and
    the backend's devices stay unknown, to be learned on a later load."""
    d = host.__dict__
    tail = []
    if last is _MISSING:
        if size:
            return None
        tail = list(d)
    else:
        for name in reversed(d):
            if name == last:
                break
            tail.append(name)
        else:
            return None  # `last` is gone
        if len(d) - len(tail) != size:
            return None  # some older key was deleted
        tail.reverse()
    prefix = f'{host_name}.'
    added = []
    for name in tail:
        if name.startswith('_'):
            continue
        value = d.get(name)
        if isinstance(value, _ModuleType) and value.__name__ == prefix + name:
            continue  # a submodule of the host, imported on the way
        added.append(name)
    return tuple(added)


def _store_devices(entry, stamp):
    """The devices a store entry ``[stamp, device...]`` holds for ``stamp``;
    None if it is for another stamp or malformed."""
    if type(entry) is not list or not entry or entry[0] != stamp:
        return None
    for d in entry:
        if type(d) is not str:
            return None
    return tuple(entry[1:])


def _stamp_of(dist_path):
    """The stamp of ``<dist_path>/entry_points.txt`` (when the index gave
    none): "dev:ino:mtime_ns:ctime_ns", or '' if it cannot be read."""
    if not dist_path:
        return ''
    try:
        st = os.stat(os.path.join(dist_path, 'entry_points.txt'))
    except OSError:
        return ''
    return f'{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}'


# ---- backends -----------------------------------------------------------------

class Backend:
    """One backend: an entry point of the autoload group and its state.

    Public, read-only: ``name``, ``value``, ``group``, ``host`` (name),
    ``dist_path``, ``devices`` (tuple, or None while unknown), ``source``
    ("declared", "learned" or None), ``state`` ("unloaded", "loading",
    "ready", "failed", "disabled"), ``cause`` (the exception of a failure).
    """

    __slots__ = ('name', 'value', 'group', 'host', 'entry_point', 'dist_path', 'stamp',
                 'key', 'devices', 'source', 'state', 'cause', 'disabled_by', 'session',
                 '_lock', '_owner', '_index')

    def __init__(self, session, ep, dist_path, stamp, devices=None, source=None,
                 disabled_by=None):
        self.session = session
        self.entry_point = ep
        self.name = ep.name
        self.value = ep.value
        self.group = ep.group
        self.host = session.host_name
        self.dist_path = dist_path
        self.stamp = stamp
        self.key = '\x1f'.join((self.name, self.value, dist_path or ''))
        self.devices = devices
        self.source = source
        self.state = 'unloaded' if disabled_by is None else 'disabled'
        self.cause = None
        self.disabled_by = disabled_by
        self._lock = _thread.allocate_lock()
        self._owner = None

    def __repr__(self):
        return (f'<epload backend {self.name!r} ({self.value}) state={self.state} '
                f'devices={self.devices!r} source={self.source}>')

    # -- loading --

    def _module_initializing(self):
        try:
            module = sys.modules.get(self.entry_point.module)
        except Exception:
            return False
        spec = getattr(module, '__spec__', None)
        return bool(getattr(spec, '_initializing', False))

    def _load(self, defer_if_initializing=False):
        """Runs the backend once.  Returns None when it is ready (or is being
        loaded by this very thread: a re-entrant lookup), 'deferred', or the
        exception it raised."""
        state = self.state
        if state == 'ready':
            return None
        if state == 'failed':
            return self.cause
        me = _thread.get_ident()
        if self._owner == me:
            return None
        with self._lock:
            if self.state == 'ready':
                return None
            if self.state == 'failed':
                return self.cause
            if (self.session.mode == 'lazy' and not defer_if_initializing
                    and self._module_initializing()):
                # A lookup while the user imports the backend's module
                # explicitly (its registration looks its own device up):
                # not there yet.  (Eager runs it, as PyTorch's loop does.)
                return None
            self._owner = me
            self.state = 'loading'
            try:
                initializing = defer_if_initializing and self._module_initializing()
                t0 = _trace.now() if _trace.ON else 0
                _loading_depth[me] = _loading_depth.get(me, 0) + 1
                try:
                    self._run()
                except Exception as err:
                    if initializing:
                        # The backend module is itself mid-import (it imported
                        # the host first): try again at the first lookup.
                        self.state = 'unloaded'
                        return _DEFERRED
                    self.cause = err
                    self.state = 'failed'
                    _eps._debug(f'backend {self.name!r} failed: {type(err).__name__}: {err}')
                    return err
                except BaseException:
                    self.state = 'unloaded'
                    raise
                finally:
                    depth = _loading_depth.pop(me) - 1
                    if depth:
                        _loading_depth[me] = depth
                    if _trace.ON:
                        _trace.record('load', self.name, t0, _trace.now())
                self.state = 'ready'
                return None
            finally:
                self._owner = None

    def _run(self):
        host = self.session.host
        ep = self.entry_point
        mark = None
        if host is not None:
            try:
                fresh = ep.module not in sys.modules
            except Exception:
                fresh = False
            # Devices are what the backend adds to the host; if its module
            # ran before (imported explicitly), that is no longer visible.
            # Dicts keep insertion order, so what the backend adds is the
            # tail after the host's last key of now: remembering that key
            # and the size costs O(1), where a copy of every name (and a
            # walk over all of them afterwards) made loading n backends
            # cost O(n^2).
            if fresh:
                d = host.__dict__
                mark = (len(d), next(reversed(d), _MISSING))
        _eps._debug(f'loading backend {self.name!r} ({self.value})')
        # A backend may turn torch's autoload switch off while it imports
        # (torch_npu does); a lazy load happens at any time, so it is put back.
        restore = self.group == TORCH_GROUP and self.session.mode == 'lazy'
        switch = os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD')
        try:
            if _trace.ON:
                _trace.import_and_call(self.name, ep)
            else:
                ep.load()()
        finally:
            if restore and os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD') != switch:
                if switch is None:
                    del os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD']
                else:
                    os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = switch
        if mark is not None:
            added = _added(host, self.session.host_name, *mark)
            if added is not None:
                self.session._learned(self, added)

    def message(self, device=None):
        err = self.cause
        where = f'{self.value!r}' + (f' from {self.dist_path}' if self.dist_path else '')
        head = (f"Device {device!r} of module {self.host!r} is unavailable: "
                if device is not None else '')
        return (f'{head}Failed to load the backend extension: {self.name} ({where}): '
                f'{type(err).__name__}: {err}. {_how_to_disable(self.group, self.name)}')

    def ensure(self, error=BackendError, device=None):
        """Loads the backend if needed; raises ``error`` (chained from the
        cause) if it failed or is disabled."""
        if self.state == 'disabled':
            raise error(f'backend {self.name!r} ({self.group}) is disabled by '
                        f'{self.disabled_by}; unset it or remove {self.name!r} from it')
        if self._load() is not None:
            raise error(self.message(device)) from self.cause


# ---- sessions -----------------------------------------------------------------

class Session:
    """The backends of one group for one host, and its device map.

    Discovery keeps what it found as the native query's plain rows plus one
    small value per backend (its known devices); a ``Backend`` object (with
    its entry point, lock and key) is created only when that backend is
    needed: loaded, looked up, or listed.  A lazy start with 1,000 backends
    whose devices are known therefore creates no per-backend object."""

    def __init__(self, group, host, host_name, mode):
        self.group = group
        self.host = host
        self.host_name = host_name
        self.mode = mode
        self.devices = {}  # device -> [backend index, ...] in discovery order
        self.error = None  # a discovery failure in lazy mode
        self.store = None  # _Store, once discovered
        self._n = 0
        self._objs = []  # Backend or None (not created yet), by index
        self._rows = ()  # native rows (name, value, group, dist position) ...
        self._dists = ()  # ... and their distributions (name, version, path, stamp)
        self._found = ()  # or, from importlib: (EntryPoint, dist path, '')
        self._native = None  # or all of it kept native: a _native.Discovery
        self._known = []  # devices per index: tuple, or None while unknown
        self._declared = set()  # indices whose devices were declared
        self._disabled = {}  # index -> the variable disabling it
        self._refs = {}  # dist position -> _DistRef shared by its backends
        # Backends whose devices were unknown at discovery: the only ones a
        # lookup of an unknown name may need (host attribute misses are
        # frequent, e.g. hasattr probes, so they must not scan all backends).
        self.unknown = []  # indices
        self._at_start = []  # indices loaded at start in lazy mode: unknown or hooks

    def __repr__(self):
        return (f'<epload autoload group={self.group!r} host={self.host_name!r} '
                f'mode={self.mode} backends={self._n}>')

    @property
    def backends(self):
        """Every backend, in discovery order (creating the objects)."""
        return [self._backend(i) for i in range(self._n)]

    def _backend(self, i):
        b = self._objs[i]
        if b is None:
            with _lock:
                b = self._objs[i]
                if b is None:
                    b = self._objs[i] = self._make(i)
        return b

    def _make(self, i):
        native = self._native
        if self._found:
            ep, path, stamp = self._found[i]
        else:
            name, value, group, pos = self._rows[i] if native is None else native.row(i)
            ref = self._refs.get(pos)
            if ref is None:
                dname, version, path, stamp = (self._dists[pos] if native is None
                                               else native.dist(pos))
                ref = self._refs[pos] = _eps._DistRef(path, dname, version, stamp)
            ep = _eps._entry_point(name, value, group, ref)
            path, stamp = ref.path, ref.stamp
        devices = self._known[i] if native is None else native.known(i)
        source = None
        if devices is not None:
            source = 'declared' if i in self._declared else 'learned'
        b = Backend(self, ep, path, stamp, devices, source, self._disabled.get(i))
        b._index = i
        return b

    def _index_of(self, name):
        if self._native is not None:
            return self._native.index_of(name)
        if self._found:
            for i, (ep, _, _) in enumerate(self._found):
                if ep.name == name:
                    return i
            return None
        for i, row in enumerate(self._rows):
            if row[0] == name:
                return i
        return None

    # -- discovery --

    def _discover(self):
        group = self.group
        if self.mode == 'lazy' and self.host is not None:
            got = _eps._discovery((group, DEVICES_GROUP))
            if got is not None and type(got) is not tuple:
                if self._discover_native(got):
                    return
                got = got.export()
        else:
            got = _eps._query((group, DEVICES_GROUP), want_stamps=True)
        if got is None:
            from importlib.metadata import entry_points
            found = self._found = [(ep, _dist_path(ep), '')
                                   for ep in entry_points(group=group)]
            names = [ep.name for ep, _, _ in found]
            declared = [(ep.name, ep.value, _dist_path(ep))
                        for ep in entry_points(group=DEVICES_GROUP)]
        else:
            dists, rows = got
            self._dists = dists
            found = self._rows = [r for r in rows if r[2] == group]
            names = [r[0] for r in found]
            declared = [(r[0], r[1], dists[r[3]][2]) for r in rows if r[2] != group]
        n = self._n = len(found)
        self._objs = [None] * n
        declarations = {}
        for name, value, path in declared:
            declarations.setdefault((path, value.strip()), []).append(name)
        disable, enable = _names('EPLOAD_DISABLE'), _names('EPLOAD_ENABLE')
        if disable is not None or enable:
            for i, name in enumerate(names):
                by = _disabled_by(name, disable, enable)
                if by is not None:
                    self._disabled[i] = by
        store = self.store = _Store(group, self.host_name)
        known = self._known = [None] * n
        device_map = self.devices
        unknown, at_start = self.unknown, self._at_start
        indices = range(n)
        matched = None
        if self.host is not None and not declarations and not self._found:
            # The common case, in C: learned devices only, matched straight
            # from the store file (no Python object per stored backend).
            matched = store.match(found, dists)
        if matched is not None:
            known, device_map, unknown, at_start, indices = matched
            self._known, self.devices, self.unknown, self._at_start = (
                known, device_map, unknown, at_start)
            # `indices` now lists the backends whose distribution had no stamp
            # from the index (rare): they go through the loop below, and the
            # lists are put back in discovery order after it.
        entries = store.entries if self.host is not None and indices else {}
        for i in indices:
            if self._found:
                ep, path, stamp = found[i]
                name, value = ep.name, ep.value
            else:
                name, value, _, pos = found[i]
                d = dists[pos]
                path, stamp = d[2], d[3]
            devices = None
            if declarations:
                names_declared = declarations.get((path, name))
                if names_declared:
                    devices = tuple(names_declared)
                    self._declared.add(i)
            if devices is None and entries:
                entry = entries.get(f'{name}\x1f{value}\x1f{path or ""}')
                if entry is not None:
                    devices = _store_devices(entry, stamp or _stamp_of(path))
            if devices:
                known[i] = devices
                for dev in devices:
                    lst = device_map.get(dev)
                    if lst is None:
                        device_map[dev] = [i]
                    else:
                        lst.append(i)
            else:
                if devices is None:
                    unknown.append(i)
                else:
                    known[i] = devices  # a hook: () learned
                at_start.append(i)
        if indices and type(indices) is list:
            unknown.sort()
            at_start.sort()
            for lst in device_map.values():
                lst.sort()

    def _discover_native(self, found):
        """The common lazy start kept native: every backend's devices
        learned for its very stamp are matched in C++ and no Python object is
        made per backend (see python/src/discovery.cpp).  False when the case
        is not the common one (declared devices, EPLOAD_DISABLE/ENABLE, no
        usable store, a backend without a stamp): then the loop in _discover
        decides, from the same rows."""
        if found.declared:
            return False
        if _names('EPLOAD_DISABLE') is not None or _names('EPLOAD_ENABLE'):
            return False
        store = _Store(self.group, self.host_name)
        if not store.path:
            return False
        got = found.match(store.path)
        if got is None or not store._ours(got[0]) or got[1] is None:
            return False
        unknown, at_start, restat = got[1]
        if restat:
            return False
        self.store = store
        self._native = found
        self._n = found.count
        self._objs = [None] * self._n
        self.unknown, self._at_start = unknown, at_start
        self.devices = _DeviceMap(found)
        return True

    def _learned(self, b, devices):
        i = b._index
        with _lock:
            # Devices known from the store (or learned before in this
            # process) for this very stamp: the store already says so, and
            # reading it into a dict to compare (~4 ms at 1,000 backends)
            # would make the first lookup of a device cost more than the
            # whole lazy start.
            known = (b.source == 'learned' and bool(b.stamp) and b.devices == devices)
            for d in devices:
                lst = self.devices.setdefault(d, [])
                if i not in lst:
                    lst.append(i)
            if b.source != 'declared':
                b.devices, b.source = devices, 'learned'
        if known:
            return
        if not b.stamp:
            b.stamp = _stamp_of(b.dist_path)
        self.store.learn(b.key, b.stamp, devices)

    # -- modes --

    def _eager(self):
        try:
            for i in range(self._n):
                b = self._backend(i)
                if b.state == 'disabled':
                    continue
                err = b._load()
                if err is not None:
                    raise RuntimeError(_pytorch_message(self.group, b.name)) from err
        finally:
            self.store.save()

    def _lazy(self):
        if self.host is not None and self._n:
            self._install_getattr()
        try:
            for i in self._at_start:
                b = self._backend(i)
                if b.state != 'unloaded' or b.devices:
                    continue  # disabled, or deferred until its devices are used
                err = b._load(defer_if_initializing=True)
                if err is not None and err is not _DEFERRED:
                    import warnings
                    warnings.warn(b.message(), RuntimeWarning, stacklevel=4)
        finally:
            self.store.save()

    def _install_getattr(self):
        host = self.host
        previous = host.__dict__.get('__getattr__')
        session = self

        def __getattr__(name):
            return session._getattr(name, previous)

        __getattr__.__qualname__ = f'{self.host_name}.__getattr__'
        host.__getattr__ = __getattr__

    # -- lookups --

    def _getattr(self, name, previous):
        host_dict = self.host.__dict__
        if not name.startswith('__'):
            candidates = self.devices.get(name)
            if candidates:
                disabled = None
                for i in list(candidates):
                    b = self._backend(i)
                    if b.state == 'disabled':
                        disabled = b
                        continue
                    b.ensure(_BackendAttributeError, name)
                    value = host_dict.get(name, _MISSING)
                    if value is not _MISSING:
                        self.store.save()
                        return value
                if disabled is not None and previous is None:
                    raise AttributeError(
                        f'module {self.host_name!r} has no attribute {name!r} (its backend '
                        f'{disabled.name!r} is disabled by {disabled.disabled_by})')
            value = self._load_unknown(name)
            if value is not _MISSING:
                return value
        if previous is not None:
            return previous(name)
        failed = [b for b in map(self._backend, self.unknown)
                  if b.state == 'failed' and b.devices is None]
        message = f'module {self.host_name!r} has no attribute {name!r}'
        if failed:
            names = ', '.join(repr(b.name) for b in failed)
            raise AttributeError(
                f'{message} (backends whose devices are unknown failed to load: {names}; '
                f'see epload.load({failed[0].name!r}))') from failed[0].cause
        raise AttributeError(message)

    def _load_unknown(self, name):
        """Loads backends whose devices are not known yet, in discovery
        order, until one provides ``name`` (on the host)."""
        if _loading_depth.get(_thread.get_ident()):
            return _MISSING
        for i in self.unknown:
            b = self._backend(i)
            if b.devices is None and b.state == 'unloaded':
                b._load()
                self.store.save()
                if self.host is not None:
                    value = self.host.__dict__.get(name, _MISSING)
                    if value is not _MISSING:
                        return value
        return _MISSING

    def device(self, name):
        for i in list(self.devices.get(name, ())):
            b = self._backend(i)
            b.ensure(BackendError, name)
            if self.host is None:
                return None
            value = self.host.__dict__.get(name, _MISSING)
            if value is not _MISSING:
                self.store.save()
                return value
        return _MISSING


class _DeviceMap:
    """A session's ``devices`` (device -> [backend index, ...]) when its
    discovery stayed native: a device's list is made on first use, from the
    native match, and then kept (learning appends to it)."""

    __slots__ = ('_found', '_lists')

    def __init__(self, found):
        self._found = found
        self._lists = {}

    def get(self, name, default=None):
        lst = self._lists.get(name)
        if lst is None:
            lst = self._found.candidates(name)
            if lst is None:
                return default
            lst = self._lists.setdefault(name, lst)  # atomic: one list wins
        return lst

    def __contains__(self, name):
        return self.get(name) is not None

    def setdefault(self, name, default):
        lst = self.get(name)
        return self._lists.setdefault(name, default) if lst is None else lst

    def __iter__(self):
        names = self._found.device_names()
        seen = set(names)
        names += [d for d in self._lists if d not in seen]
        return iter(names)


def _dist_path(ep):
    path = getattr(ep.dist, '_path', None)
    return None if path is None else os.fspath(path)


def _resolve_host(host):
    if host is None:
        return None, None
    if isinstance(host, str):
        module = sys.modules.get(host)
        if module is None:
            from importlib import import_module
            module = import_module(host)
        return module, host
    if not isinstance(host, _ModuleType):
        raise TypeError(f'host must be a module or a module name, not {type(host).__name__}')
    return host, host.__name__


# ---- the API ------------------------------------------------------------------

def autoload(group=TORCH_GROUP, host=None, mode=None):
    if mode is None:
        mode = os.environ.get('EPLOAD_MODE') or 'lazy'
    if mode not in MODES:
        raise ValueError(f"autoload mode must be one of {', '.join(MODES)}, not {mode!r} "
                         f"(argument mode= or EPLOAD_MODE)")
    module, host_name = _resolve_host(host)
    if mode == 'lazy' and module is None:
        raise ValueError('lazy autoload needs a host module (host=...) to register devices on')
    key = (group, host_name, id(module))
    with _lock:
        session = _sessions.get(key)
        if session is not None:
            return session
        session = Session(group, module, host_name, mode)
        _sessions[key] = session
        _session_order.append(session)
    switch = _switch_off(group)
    if mode == 'off' or switch is not None:
        session.mode = 'off'
        _eps._debug(f'autoload of {group!r} is off'
                    + (f' ({switch} is set)' if switch and mode != 'off' else ''))
        return session
    if mode == 'eager':
        # As PyTorch: a discovery error propagates unchanged.
        session._discover()
        session._eager()
        return session
    try:
        session._discover()
    except Exception as err:
        session.error = err
        import warnings
        warnings.warn(f'epload: cannot discover the {group!r} backends: '
                      f'{type(err).__name__}: {err}', RuntimeWarning, stacklevel=3)
        return session
    session._lazy()
    if group == TORCH_GROUP and host_name == 'torch':
        from . import _torch_lazy  # device strings, torch.<device> imports
        _torch_lazy.attach(session)
    return session


def _sessions_snapshot():
    with _lock:
        return list(_session_order)


def device(name):
    sessions = _sessions_snapshot()
    for s in sessions:
        if name in s.devices:
            value = s.device(name)
            if value is not _MISSING:
                return value
    for s in sessions:
        value = s._load_unknown(name)
        if value is not _MISSING:
            return value
        if name in s.devices:
            value = s.device(name)
            if value is not _MISSING:
                return value
    known = sorted({d for s in sessions for d in s.devices})
    failed = [b for s in sessions for b in s.backends if b.state == 'failed']
    message = f'no backend provides device {name!r}; known devices: {", ".join(known) or "none"}'
    if failed:
        message += '; failed backends: ' + '; '.join(
            f'{b.name} ({type(b.cause).__name__}: {b.cause})' for b in failed)
    disabled = [b.name for s in sessions for b in s.backends if b.state == 'disabled']
    if disabled:
        message += '; disabled backends: ' + ', '.join(disabled)
    errors = [s.error for s in sessions if s.error is not None]
    if errors:
        raise DeviceNotFoundError(message) from errors[0]
    raise DeviceNotFoundError(message)


def load(name):
    for s in _sessions_snapshot():
        i = s._index_of(name)
        if i is not None:
            s._backend(i).ensure(BackendError)
            s.store.save()
            return None
    known = [b.name for s in _sessions_snapshot() for b in s.backends]
    raise LookupError(f'no backend named {name!r} in any autoload session; known: '
                      f'{", ".join(known) or "none (call epload.autoload first)"}')


def backends():
    return [b for s in _sessions_snapshot() for b in s.backends]

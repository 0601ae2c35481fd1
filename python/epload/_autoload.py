"""Autoload of Python backends declared as entry points: eager, lazy or off.

A *backend* is one entry point of the autoload group (``torch.backends`` by
default) whose value names a callable, PyTorch's contract: loading it means
``ep.load()()``.  Backends register *devices* on a *host* module (``torch.npu``
after ``torch_npu`` ran).

What loads and when is decided by the core's Loader (include/epload/
loader.hpp, through ``_native.open_loader``), the same code the ``epload``
command and C++ hosts run: the switches (epload/switches.hpp), the
learned-devices store (one file format, src/loader/learned.cpp, that ``epload
devices`` reads too), and what is known of each backend.  This module only
imports and calls a backend when the Loader asks, and tells it which public
attributes the backend added to the host (its devices, kind "attr").  Modes:

* ``eager``: PyTorch's loop (discovery order, import then call, the first
  failure raises RuntimeError with PyTorch's text, chained from the cause).
* ``lazy``: a backend whose devices are known (declared in its
  distribution's ``epload.devices`` entry points, or learned by an earlier
  run) is not imported until the first ``host.<device>``,
  ``epload.device(<device>)`` or ``epload.load(<backend>)``.  A backend with
  no known devices is loaded at once and its devices learned; a backend that
  registers none is a *hook* and runs at once.  A failure never breaks
  ``import host``: it is warned about and raised at the first lookup that
  needs the backend.
* ``off``: nothing.

Each backend loads at most once however many threads ask (the Loader's
state machine); a lookup made by the backend's own init (or an import cycle
through the host) gets "not there yet" instead of a deadlock.  Failures are
sticky until the backend's file changes.

Switches (read by the core, the same for every front):
``TORCH_DEVICE_BACKEND_AUTOLOAD`` (group torch.backends) and
``EPLOAD_AUTOLOAD`` (every group) -- unset or exactly ``1`` enables, anything
else turns autoload off; ``EPLOAD_DISABLE=a,b`` skips the named backends,
``EPLOAD_ENABLE=a,b`` loads only those (entry-point or distribution names);
``EPLOAD_MODE`` is the mode when the caller gives none (a bad value is a
warning, and lazy applies).
"""

import _thread
import os
import sys

from . import _entry_points as _eps
from . import _trace
from ._types import _DistRef, _entry_point

TORCH_GROUP = 'torch.backends'
DEVICES_GROUP = 'epload.devices'  # where a distribution declares its backends' devices
MODES = ('lazy', 'eager', 'off')

_MISSING = object()
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

# Host name -> a probe for devices a backend provides other than as host
# attributes (the PyTorch front sets one for "torch": the PrivateUse1 name).
# ``probe(None)`` is called before a backend runs and ``probe(token)``, with
# what that returned, after it: the second call returns (device, kind)
# pairs, learned with the backend (kind: [a-z0-9_]{1,15}, e.g.
# "privateuse1").  Set it before the host's autoload starts.
probes = {}


def _switches(group):
    """(mode, off_by, enable, disable) for ``group``, as the core reads the
    environment for every front (epload/switches.hpp); a bad value is
    warned about once and its default used."""
    mode, off_by, enable, disable, warnings = _eps._native_module().switches(group)
    if warnings:
        _eps._warn_switches(warnings, stacklevel=5)
    return mode, off_by, enable, disable


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message):
    """Warns (RuntimeWarning) at the first frame outside epload and the
    import system: the user's ``import torch`` line (or the line that
    imported the host, or called epload), where a fixed ``stacklevel``
    would land on a frame inside epload's hook.  (Python 3.12's
    ``skip_file_prefixes`` does this; 3.10 and 3.11 have no such option.)"""
    import warnings
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_PACKAGE_DIR) or name.startswith('<frozen importlib')):
            break
        frame = frame.f_back
    if frame is None:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return
    g = frame.f_globals
    # No module_globals: its loader would be asked for the source line, and
    # the loader of `python -c`'s __main__ raises ImportError there.
    warnings.warn_explicit(message, RuntimeWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=g.get('__name__'), registry=g.setdefault('__warningregistry__', {}))


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


# ---- backends -----------------------------------------------------------------

class Backend:
    """One backend: an entry point of the autoload group, as the core
    describes it (BackendStatus), read when asked.

    Public, read-only: ``name``, ``value``, ``group``, ``host`` (name),
    ``dist``, ``dist_path``, ``devices`` (tuple, or None while unknown),
    ``source`` ("declared", "learned", "section" or None), ``kinds`` (per
    device: "attr", "privateuse1", ... or ""), ``state`` ("unloaded",
    "loading", "ready", "failed", "disabled"), ``cause`` (the exception of a
    failure), ``error`` (the core's message).
    """

    __slots__ = ('session', 'index', 'name', 'value', 'group', 'host', 'dist', 'version',
                 'dist_path', '_ep')

    def __init__(self, session, index):
        self.session = session
        self.index = index
        self.name, self.value, self.dist, self.version, self.dist_path = session.loader.entry(index)
        self.group = session.group
        self.host = session.host_name
        self._ep = None

    def __repr__(self):
        return (f'<epload backend {self.name!r} ({self.value}) state={self.state} '
                f'devices={self.devices!r} source={self.source}>')

    def _status(self):
        return self.session.loader.status(self.index)

    @property
    def state(self):
        return self._status()[0]

    @property
    def error(self):
        return self._status()[3]

    @property
    def devices(self):
        st = self._status()
        return tuple(d[0] for d in st[6]) if st[4] else None

    @property
    def kinds(self):
        st = self._status()
        return tuple(d[2] for d in st[6]) if st[4] else None

    @property
    def source(self):
        st = self._status()
        if not st[4] or not st[6]:
            return None
        return st[6][0][1]

    @property
    def cause(self):
        return self.session._causes.get(self.index)

    @property
    def disabled_by(self):
        err = self.error
        for variable in ('EPLOAD_DISABLE', 'EPLOAD_ENABLE'):
            if f'disabled by {variable}' in err:
                return variable
        return None

    @property
    def entry_point(self):
        if self._ep is None:
            ref = _DistRef(self.dist_path, self.dist, self.version, '')
            self._ep = _entry_point(self.name, self.value, self.group, ref)
        return self._ep

    def message(self, device=None):
        err = self.cause
        where = f'{self.value!r}' + (f' from {self.dist_path}' if self.dist_path else '')
        head = (f"Device {device!r} of module {self.host!r} is unavailable: "
                if device is not None else '')
        cause = f'{type(err).__name__}: {err}' if err is not None else self.error
        return (f'{head}Failed to load the backend extension: {self.name} ({where}): '
                f'{cause}. {_how_to_disable(self.group, self.name)}')

    def ensure(self, error=BackendError, device=None):
        """Loads the backend if needed; raises ``error`` (chained from the
        cause) if it failed or is disabled."""
        got = self.session.loader.load(self.index)
        if got is None or got[0] == 'later':
            return
        if self.state == 'disabled':
            raise error(f'backend {self.name!r} ({self.group}) is disabled by '
                        f'{self.disabled_by}; unset it or remove {self.name!r} from it')
        raise error(self.message(device)) from self.cause


# ---- sessions -----------------------------------------------------------------

class Session:
    """The backends of one group for one host: the core's Loader and what
    the Python side keeps of it (the exceptions backends raised)."""

    def __init__(self, group, host, host_name, mode):
        self.group = group
        self.host = host
        self.host_name = host_name
        self.mode = mode
        self.error = None  # a discovery failure in lazy mode
        self.loader = None  # _native.Loader, once discovered
        self._causes = {}  # backend index -> the exception it raised
        self._objs = {}
        self._starting = None  # the thread running the Loader's start()

    def __repr__(self):
        n = self.loader.count if self.loader is not None else 0
        return (f'<epload autoload group={self.group!r} host={self.host_name!r} '
                f'mode={self.mode} backends={n}>')

    @property
    def backends(self):
        """Every backend, in discovery order."""
        if self.loader is None:
            return []
        return [self._backend(i) for i in range(self.loader.count)]

    def _backend(self, i):
        b = self._objs.get(i)
        if b is None:
            b = self._objs.setdefault(i, Backend(self, i))
        return b

    @property
    def devices(self):
        """Every known device name (declared, learned or registered)."""
        if self.loader is None:
            return ()
        return [d[0] for d in self.loader.devices()]

    # -- the Loader's Python loader --

    def _run(self, i):
        """Imports and calls backend ``i`` for the Loader: ((device, kind),
        ...), known) or the failure as a str ("later:..." while its module is
        itself being imported)."""
        b = self._backend(i)
        ep = b.entry_point
        host = self.host
        mark = None
        if host is not None:
            try:
                fresh = ep.module not in sys.modules
            except Exception:
                fresh = False
            # Devices are what the backend adds to the host; if its module
            # ran before (imported explicitly), that is no longer visible.
            # Dicts keep insertion order, so what the backend adds is the
            # tail after the host's last key of now.
            if fresh:
                d = host.__dict__
                mark = (len(d), next(reversed(d), _MISSING))
        # Lazy mode tries again later; eager is PyTorch's loop, which fails.
        me = _thread.get_ident()
        initializing = self.mode == 'lazy' and _module_initializing(ep)
        if initializing and self._starting != me:
            # A lookup while the user imports the backend's module explicitly
            # (its registration looks its own device up): not there yet.
            # (Eager runs it, as PyTorch's loop does.)
            return f'later:{b.value} is being imported'
        probe = probes.get(self.host_name)
        token = probe(None) if probe is not None else None
        _eps._debug(f'loading backend {b.name!r} ({b.value})')
        # A backend may turn torch's autoload switch off while it imports
        # (torch_npu does); a lazy load happens at any time, so it is put back.
        restore = self.group == TORCH_GROUP and self.mode == 'lazy'
        switch = os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD')
        _loading_depth[me] = _loading_depth.get(me, 0) + 1
        try:
            # The core records the `load` span around this call; the import
            # and the call are recorded here.
            if _trace.ON:
                _trace.import_and_call(b.name, ep)
            else:
                ep.load()()
        except Exception as err:
            if initializing:
                # The backend module is itself mid-import (it imported the
                # host first): try again at the first lookup.
                return f'later:{type(err).__name__}: {err}'
            self._causes[i] = err
            _eps._debug(f'backend {b.name!r} failed: {type(err).__name__}: {err}')
            return f'{type(err).__name__}: {err}'
        finally:
            depth = _loading_depth.pop(me) - 1
            if depth:
                _loading_depth[me] = depth
            if restore and os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD') != switch:
                if switch is None:
                    del os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD']
                else:
                    os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = switch
        extra = tuple(probe(token)) if probe is not None else ()
        if mark is None:
            return (extra, False)
        added = _added(host, self.host_name, *mark)
        if added is None:
            return (extra, False)
        # A probed device that is an attribute too (torch.<PrivateUse1 name>)
        # is one device, of the probe's kind.
        probed = {name for name, _ in extra}
        return (tuple((name, 'attr') for name in added if name not in probed) + extra, True)

    # -- discovery and modes --

    def _open(self):
        self.loader = _eps._open_loader(self.group, self.mode, self._run)
        return self.loader is not None

    def _eager(self):
        self.loader.start()
        for i in self.loader.load_order():
            if self.loader.status(i)[0] == 'failed':
                b = self._backend(i)
                raise RuntimeError(_pytorch_message(self.group, b.name)) from self._causes.get(i)

    def _lazy(self):
        if self.host is not None and self.loader.count:
            self._install_getattr()
        self._starting = _thread.get_ident()
        try:
            self.loader.start()
        finally:
            self._starting = None
        for i in self.loader.load_order():
            if self.loader.status(i)[0] == 'failed':
                warn_user(self._backend(i).message())

    def _install_getattr(self):
        host = self.host
        previous = host.__dict__.get('__getattr__')
        session = self

        def __getattr__(name):
            return session._getattr(name, previous)

        __getattr__.__qualname__ = f'{self.host_name}.__getattr__'
        host.__getattr__ = __getattr__

    # -- lookups --

    def _value(self, name):
        if self.host is None:
            return None if self.loader.ready(name) else _MISSING
        return self.host.__dict__.get(name, _MISSING)

    def _getattr(self, name, previous):
        if not name.startswith('__'):
            value = self._lookup(name, _BackendAttributeError, previous is None)
            if value is not _MISSING:
                return value
        if previous is not None:
            if name.startswith('__'):
                return previous(name)
            try:
                return previous(name)
            except AttributeError as err:
                # The host's own miss (torch's), told apart from a name a
                # backend that could not load may have provided.
                failed = self._failed_unknown()
                if not failed:
                    raise
                raise AttributeError(self._miss_message(str(err), failed), name=name,
                                     obj=self.host) from failed[0].cause
        message = f'module {self.host_name!r} has no attribute {name!r}'
        failed = self._failed_unknown()
        if failed:
            raise AttributeError(self._miss_message(message, failed), name=name,
                                 obj=self.host) from failed[0].cause
        raise AttributeError(message, name=name, obj=self.host)

    def _failed_unknown(self):
        """The backends that failed to load before telling their devices:
        any of them may be the provider of a name no one has."""
        # Only a backend that was tried can have failed: the load order, not
        # every backend (attribute misses are frequent: hasattr probes).
        return [b for b in map(self._backend, self.loader.load_order())
                if b.state == 'failed' and b.devices is None]

    @staticmethod
    def _miss_message(message, failed):
        why = '; '.join(f'{b.name!r} ({type(b.cause).__name__}: {b.cause})' if b.cause is not None
                        else f'{b.name!r} ({b.error})' for b in failed)
        return (f'{message} (backends whose devices are unknown failed to load, one of them may '
                f'provide it: {why}; see epload.load({failed[0].name!r}))')

    def _lookup(self, name, error, raise_disabled=True):
        """The host's ``name`` after the Loader looked it up (loading its
        backend); _MISSING when no backend provides it.  Raises ``error``
        when its backend failed."""
        loader = self.loader
        owner = loader.provider(name)
        if owner is None and _loading_depth.get(_thread.get_ident()):
            return self._value(name)  # asked from inside an init: no other backend runs
        got = loader.lookup(name)
        value = self._value(name)
        if got is None or got[0] == 'later' or value is not _MISSING:
            return value
        if owner is not None:
            b = self._backend(owner)
            if b.state == 'failed':
                raise error(b.message(name)) from b.cause
        elif 'disabled by EPLOAD_' in got[1]:
            # A disabled backend claims nothing; the core names it.
            for b in self.backends:
                if b.state == 'disabled' and b.devices and name in b.devices:
                    if not raise_disabled:
                        return _MISSING
                    if error is BackendError:
                        raise error(f'backend {b.name!r} ({self.group}) is disabled by '
                                    f'{b.disabled_by}; unset it or remove {b.name!r} from it')
                    raise AttributeError(
                        f'module {self.host_name!r} has no attribute {name!r} (its backend '
                        f'{b.name!r} is disabled by {b.disabled_by})')
        return _MISSING

    def device(self, name):
        return self._lookup(name, BackendError)


def _module_initializing(ep):
    try:
        module = sys.modules.get(ep.module)
    except Exception:
        return False
    spec = getattr(module, '__spec__', None)
    return bool(getattr(spec, '_initializing', False))


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


def _importlib_loop(session):
    """When importlib must answer discovery (a finder or path epload's index
    cannot answer for): PyTorch's loop over importlib's entry points, every
    backend at once; in lazy mode a failure is a warning."""
    from importlib.metadata import entry_points
    _, _, enable, disable = _switches(session.group)
    disabled_by = _eps._native_module().disabled_by
    for ep in entry_points(group=session.group):
        if disabled_by(enable, disable, ep.name, ep.dist.name if ep.dist else ''):
            continue
        try:
            ep.load()()
        except Exception as err:
            if session.mode == 'eager':
                raise RuntimeError(_pytorch_message(session.group, ep.name)) from err
            warn_user(f'Failed to load the backend extension: {ep.name}: '
                      f'{type(err).__name__}: {err}. {_how_to_disable(session.group, ep.name)}')


# ---- the API ------------------------------------------------------------------

def autoload(group=TORCH_GROUP, host=None, mode=None):
    env_mode, switch, _, _ = _switches(group)
    if mode is None:
        mode = env_mode
    if mode not in MODES:
        raise ValueError(f"autoload mode must be one of {', '.join(MODES)}, not {mode!r} "
                         f"(argument mode=)")
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
    if mode == 'off' or switch:
        session.mode = 'off'
        _eps._debug(f'autoload of {group!r} is off'
                    + (f' ({switch} is set)' if switch and mode != 'off' else ''))
        return session
    torch = group == TORCH_GROUP and host_name == 'torch'
    if torch:
        from . import _torch_lazy  # the PrivateUse1 name, torch.<device> imports
        probes.setdefault(host_name, _torch_lazy.probe)
    if mode == 'eager':
        # As PyTorch: a discovery error propagates unchanged.
        if session._open():
            session._eager()
        else:
            _importlib_loop(session)
        return session
    try:
        opened = session._open()
    except Exception as err:
        session.error = err
        warn_user(f'epload: cannot discover the {group!r} backends: {type(err).__name__}: {err}')
        return session
    if opened:
        session._lazy()
        if torch:
            _torch_lazy.attach(session)
        if _eps._debug_enabled():
            note = session.loader.store_note()
            if note:
                _eps._debug(f'learned-devices store: {note}')
    else:
        _importlib_loop(session)
    return session


def _sessions_snapshot():
    with _lock:
        return [s for s in _session_order if s.loader is not None]


def device(name):
    sessions = _sessions_snapshot()
    for s in sessions:
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
    errors = [s.error for s in _session_order if s.error is not None]
    if errors:
        raise DeviceNotFoundError(message) from errors[0]
    raise DeviceNotFoundError(message)


def load(name):
    for s in _sessions_snapshot():
        i = s.loader.index_of(name)
        if i is not None:
            s._backend(i).ensure(BackendError)
            return None
    known = [b.name for s in _sessions_snapshot() for b in s.backends]
    raise LookupError(f'no backend named {name!r} in any autoload session; known: '
                      f'{", ".join(known) or "none (call epload.autoload first)"}')


def backends():
    return [b for s in _sessions_snapshot() for b in s.backends]

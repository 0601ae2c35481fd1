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
  ``import host``: it is warned about and raised at every lookup that
  needs the backend, and nothing it set on the host before failing is
  kept.  A KeyboardInterrupt or SystemExit raised by a backend is no
  failure: it propagates unchanged, in every mode, and the backend stays
  loadable.
* ``off``: nothing.

Each backend loads at most once however many threads ask (the Loader's
state machine); a lookup made by the backend's own init (or an import cycle
through the host) gets "not there yet" instead of a deadlock (the Loader's
rule too).  What crosses from the core is typed: a status with named fields
and the core's enums (``_native.State``...), a ``LoadError`` whose
``later`` says "not now", and the core's wording of a failure.  Failures are
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


# The core's notes (Loader.store_note) that mean the learned-devices store
# cannot be used at all, as opposed to one that was missing or stale.
_STORE_UNUSABLE = ('cannot write the learned-devices store', 'no cache directory')


class DeviceNotFoundError(LookupError):
    """No backend provides the device."""


class NativeDevice:
    """A device a native (C ABI) backend registered: what ``epload.device``
    and ``host.<device>`` give for it.  ``table`` is the address of the
    table the backend registered (``ctypes.c_void_p(table)``), valid for
    the life of the process; ``backend`` its entry point name."""

    __slots__ = ('name', 'backend', 'table')

    def __init__(self, name, backend, table):
        self.name = name
        self.backend = backend
        self.table = table

    def __repr__(self):
        return f'<epload native device {self.name!r} of backend {self.backend!r} at {self.table:#x}>'


_lock = _thread.allocate_lock()  # the registries below; never held while importing


def _after_fork_in_child():
    # A thread of the parent may have held it at the fork: it does not exist
    # in the child, so the lock is made anew there.
    global _lock
    _lock = _thread.allocate_lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Cycle(LookupError):
    """Raised by a front's ``hold`` when taking it would wait for a thread
    that (transitively) waits for this one: two first uses whose backends'
    inits look up each other's devices.  The lookup is then "not there yet",
    as a backend's own init sees for its own device."""


_sessions = {}  # (group, host name, id(host)) -> Session
_in_load = _thread._local()  # .stack: (session, backend index) of the loads this thread runs
_session_order = []

# (group, host name) -> the front of a framework: what it adds to the
# generic session, each part optional (the PyTorch front, _torch_lazy,
# registers itself for ("torch.backends", "torch") when it is imported):
#   probe(token)     devices a backend provides other than as host
#                    attributes: ``probe(None)`` is called before a backend
#                    runs and ``probe(token)``, with what that returned,
#                    after it, returning (device, kind) pairs learned with
#                    the backend (kind: [a-z0-9_]{1,15}, e.g. "privateuse1");
#   hold(b)          a context a thread enters before it may load backend
#                    ``b`` (lazy mode); raises _Cycle instead of waiting for
#                    a thread that waits for this one ("not there yet");
#   loading(b)       the context of ``b``'s import and call, in the thread
#                    that loads it (lazy mode);
#   before_start(session)  called in a lazy autoload before the Loader's
#                    start() loads the backends it loads at once;
#   attach(session)  called at the end of a lazy autoload.
# Register it before the host's autoload starts.
fronts = {}


def _switches(group):
    """(mode, off_by, enable, disable) for ``group``, as the core reads the
    environment for every front (epload/switches.hpp); a bad value is
    warned about once and its default used."""
    mode, off_by, enable, disable, warnings = _eps._native_module().switches(group)
    if warnings:
        _eps._warn_switches(warnings)
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


def _native():
    return _eps._native_module()


def _cause_text(err):
    return f'{type(err).__name__}: {err}'


def _disabled_message(b, by):
    return (f'backend {b.name!r} ({b.group}) is disabled by {by}; unset it or remove '
            f'{b.name!r} from it')


def _added(host, host_name, size, last):
    """The public names added to ``host`` since its ``__dict__`` had ``size``
    keys, the last being ``last``: the keys after ``last`` (new keys go to
    the end of a dict), except names starting with ``_`` and the host's own
    submodules imported on the way.  None when it cannot be told cheaply
    (``last`` was deleted, or an older key was: a key deleted and set again
    moves to the end too and would look new): then nothing is learned and
    the backend's devices stay unknown, to be learned on a later load."""
    tail = _new_keys(host, size, last)
    if tail is None:
        return None
    d = host.__dict__
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


def _new_keys(host, size, last):
    """The keys of ``host.__dict__`` after ``last`` (see _added), in order;
    None when that cannot be told."""
    d = host.__dict__
    tail = []
    if last is _MISSING:
        if size:
            return None
        return list(d)
    for name in reversed(d):
        if name == last:
            break
        tail.append(name)
    else:
        return None  # `last` is gone
    if len(d) - len(tail) != size:
        return None  # some older key was deleted
    tail.reverse()
    return tail


def _undo_added(host, host_name, size, last):
    """Takes back what a load that failed or was interrupted added to
    ``host``: the names it set (``torch.foo``) and the ``sys.modules``
    entries of ``<host>.<name>`` holding the same objects
    (``torch._register_device_module``).  A submodule imported the ordinary
    way on the way (a spec with a loader) stays, as does anything the host
    cannot undo (PyTorch's PrivateUse1 name).  So no use is ever served
    what a failed backend left half-registered."""
    tail = _new_keys(host, size, last)
    if not tail:
        return
    d = host.__dict__
    for name in tail:
        value = d.get(name, _MISSING)
        full = f'{host_name}.{name}'
        if isinstance(value, _ModuleType) and value.__name__ == full \
                and getattr(value.__spec__, 'loader', None) is not None \
                and sys.modules.get(full) is value:
            continue  # a submodule of the host, imported on the way
        d.pop(name, None)
        if value is not _MISSING and sys.modules.get(full) is value:
            del sys.modules[full]


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
        """The core's BackendStatus (named fields, _native.State...)."""
        return self.session.loader.status(self.index)

    @property
    def state(self):
        return self._status().state.name

    @property
    def error(self):
        return self._status().error

    @property
    def devices(self):
        st = self._status()
        return tuple(st.devices) if st.devices_known else None

    @property
    def kinds(self):
        st = self._status()
        return tuple(st.kinds) if st.devices_known else None

    @property
    def source(self):
        st = self._status()
        if not st.devices_known or not st.sources:
            return None
        return st.sources[0].name

    @property
    def cause(self):
        return self.session._causes.get(self.index)

    @property
    def disabled_by(self):
        return self._status().disabled_by

    @property
    def entry_point(self):
        if self._ep is None:
            ref = _DistRef(self.dist_path, self.dist, self.version, '')
            self._ep = _entry_point(self.name, self.value, self.group, ref)
        return self._ep

    def message(self, device=None):
        """The failure as the core words it, with what this backend raised."""
        err = self.cause
        cause = _cause_text(err) if err is not None else self.error
        return _native().failure_message(self.group, self.name, cause, value=self.value,
                                         dist_path=self.dist_path or None, device=device,
                                         host=self.host)

    def ensure(self, error=BackendError, device=None):
        """Loads the backend if needed; raises ``error`` (chained from the
        cause) if it failed or is disabled."""
        try:
            with self.session._hold(self.index):
                got = self.session.loader.load(self.index)
        except _Cycle as err:
            raise error(f'backend {self.name!r} ({self.value}) is not there yet: {err}') from None
        if got is None or got.later:
            return
        st = self._status()
        if st.state == _native().State.disabled:
            raise error(_disabled_message(self, st.disabled_by))
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
        self.front = fronts.get((group, host_name))  # a framework's additions, or None

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
        return [d.name for d in self.loader.devices()]

    # -- the Loader's Python loader --

    def _run(self, i):
        """Imports and calls backend ``i`` for the Loader: a ``_native.Loaded``
        (its devices and kinds, and whether they are known); raises
        ``_native.NotNow`` while its module is itself being imported, or
        what the backend raised: an Exception is its failure (kept as its
        cause), any other BaseException (KeyboardInterrupt, SystemExit)
        interrupts the load and propagates unchanged, recorded nowhere.  In
        lazy mode what either left on the host is taken back
        (_undo_added)."""
        b = self._backend(i)
        ep = b.entry_point
        host = self.host
        mark = before = None
        if host is not None:
            try:
                fresh = ep.module not in sys.modules
            except Exception:
                fresh = False
            # Devices are what the backend adds to the host; if its module
            # ran before (imported explicitly), that is no longer visible.
            # Dicts keep insertion order, so what the backend adds is the
            # tail after the host's last key of now.
            d = host.__dict__
            before = (len(d), next(reversed(d), _MISSING))
            if fresh:
                mark = before
        # Lazy mode tries again later; eager is PyTorch's loop, which fails.
        me = _thread.get_ident()
        initializing = self.mode == 'lazy' and _module_initializing(ep)
        if initializing and self._starting != me:
            # A lookup while the user imports the backend's module explicitly
            # (its registration looks its own device up): not there yet.
            # (Eager runs it, as PyTorch's loop does.)
            raise _native().NotNow(f'{b.value} is being imported')
        probe = getattr(self.front, 'probe', None)
        token = probe(None) if probe is not None else None
        _eps._debug(f'loading backend {b.name!r} ({b.value})')
        # A backend may turn torch's autoload switch off while it imports
        # (torch_npu does); a lazy load happens at any time, so it is put back.
        restore = self.group == TORCH_GROUP and self.mode == 'lazy'
        switch = os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD')
        extra = ()
        try:
            # The core records the `load` span around this call; the import
            # and the call are recorded here.
            guard = getattr(self.front, 'loading', None) if self.mode == 'lazy' else None
            stack = getattr(_in_load, 'stack', None)
            if stack is None:
                stack = _in_load.stack = []
            stack.append((self, i))
            try:
                with guard(b) if guard is not None else _NO_GUARD:
                    if _trace.ON:
                        _trace.import_and_call(b.name, ep)
                    else:
                        ep.load()()
            finally:
                stack.pop()
        except Exception as err:
            if initializing:
                # The backend module is itself mid-import (it imported the
                # host first): try again at the first lookup.
                raise _native().NotNow(_cause_text(err)) from None
            self._causes[i] = err
            _eps._debug(f'backend {b.name!r} failed: {_cause_text(err)}')
            if before is not None and self.mode == 'lazy':
                _undo_added(host, self.host_name, *before)  # eager: import host fails, as stock
            raise
        except BaseException:
            # KeyboardInterrupt, SystemExit...: it propagates unchanged and
            # is no failure (the core keeps the backend unloaded, loadable).
            if before is not None and self.mode == 'lazy':
                _undo_added(host, self.host_name, *before)
            raise
        finally:
            if probe is not None:  # after a failed load too: the probe's watch ends
                extra = tuple(probe(token))
            if restore and os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD') != switch:
                if switch is None:
                    del os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD']
                else:
                    os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = switch
        loaded = _native().Loaded
        if mark is None:
            return loaded(devices=extra, known=False)
        added = _added(host, self.host_name, *mark)
        if added is None:
            return loaded(devices=extra, known=False)
        # A probed device that is an attribute too (torch.<PrivateUse1 name>)
        # is one device, of the probe's kind.
        probed = {name for name, _ in extra}
        return loaded(devices=tuple((name, 'attr') for name in added if name not in probed) + extra,
                      known=True)

    # -- discovery and modes --

    def _open(self):
        self.loader = _eps._open_loader(self.group, self.mode, self._run)
        if self.loader is None:
            return False
        # A name in EPLOAD_DISABLE / EPLOAD_ENABLE that is no backend of the
        # group (a typo) is warned about, naming the close ones.
        _, _, enable, disable = _switches(self.group)
        if enable or disable:
            entries = [self.loader.entry(i) for i in range(self.loader.count)]
            _eps._warn_switches(_native().unmatched_names(
                self.group, enable, disable, [(e[0], e[2]) for e in entries]))
        return True

    def _eager(self):
        self.loader.start()
        failed = _native().State.failed
        for i in self.loader.load_order():
            if self.loader.status(i).state == failed:
                b = self._backend(i)
                raise RuntimeError(_native().pytorch_failure_message(self.group, b.name)) \
                    from self._causes.get(i)

    def _lazy(self):
        if self.host is not None and self.loader.count:
            self._install_getattr()
        self._starting = _thread.get_ident()
        try:
            before = getattr(self.front, 'before_start', None)
            if before is not None:
                before(self)
            self.loader.start()
        finally:
            self._starting = None
        failed = _native().State.failed
        for i in self.loader.load_order():
            if self.loader.status(i).state == failed:
                warn_user(self._backend(i).message())
        # Devices two backends declare, and (under torch) devices that are
        # PyTorch's own types: the backend is never consulted for those.
        for warning in self.loader.clash_warnings(self.group == TORCH_GROUP):
            warn_user(f'epload: {warning}')

    def _install_getattr(self):
        host = self.host
        previous = host.__dict__.get('__getattr__')
        session = self

        def __getattr__(name):
            return session._getattr(name, previous)

        __getattr__.__qualname__ = f'{self.host_name}.__getattr__'
        host.__getattr__ = __getattr__

    # -- lookups --

    def _hold(self, i):
        """The context a thread enters before it may load backend ``i``
        (None: no backend): the front's ``hold`` in lazy mode while
        the backend is not loaded yet."""
        hold = getattr(self.front, 'hold', None)
        if hold is None or i is None or self.mode != 'lazy':
            return _NO_GUARD
        state = _native().State
        if self.loader.status(i).state not in (state.unloaded, state.loading):
            return _NO_GUARD
        return hold(self._backend(i))

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
                # disabled backend provides (named with its variable) and a
                # name a backend that could not load may have provided.
                disabled = self._disabled_provider(name)
                if disabled is not None:
                    raise AttributeError(
                        f'{err} (its backend {disabled.name!r} is disabled by '
                        f'{disabled.disabled_by})', name=name, obj=self.host) from None
                failed = self._failed_unknown()
                if not failed:
                    raise
                raise self._miss_error(str(err), failed, name) from failed[0].cause
        message = f'module {self.host_name!r} has no attribute {name!r}'
        failed = self._failed_unknown()
        if failed:
            raise self._miss_error(message, failed, name) from failed[0].cause
        raise AttributeError(message, name=name, obj=self.host)

    def _failed_unknown(self):
        """The backends that failed to load before telling their devices:
        any of them may be the provider of a name no one has."""
        # Only a backend that was tried can have failed: the load order, not
        # every backend (attribute misses are frequent: hasattr probes).
        failed = _native().State.failed
        return [b for b in map(self._backend, self.loader.load_order())
                if (st := b._status()).state == failed and not st.devices_known]

    def _miss_error(self, message, failed, name):
        """A miss while backends whose devices are unknown have failed: the
        name may be one of theirs, so the error is a backend's failure as
        much as a miss (both RuntimeError and AttributeError, as the error of
        a known device's failed backend)."""
        why = '; '.join(f'{b.name!r} ({_cause_text(b.cause)})' if b.cause is not None
                        else f'{b.name!r} ({b.error})' for b in failed)
        err = _BackendAttributeError(f'{message} (backends whose devices are unknown failed to load, '
                                     f'one of them may provide it: {why}; see '
                                     f'epload.load({failed[0].name!r}))')
        err.name, err.obj = name, self.host
        return err

    def _later_than_this_load(self, owner):
        """True when this thread is inside the load of one of this session's
        backends and backend ``owner`` comes after it in discovery order, not
        loaded yet.  Stock's loop loads backends in that order, so a
        backend's init sees those before it and never one after it; the
        same rule here also leaves two inits no way to wait on each other."""
        stack = getattr(_in_load, 'stack', None)
        if not stack or stack[-1][0] is not self or owner <= stack[-1][1]:
            return False
        state = _native().State
        return self.loader.status(owner).state in (state.unloaded, state.loading)

    def _lookup(self, name, error, raise_disabled=True):
        """The host's ``name`` after the Loader looked it up (loading its
        backend); _MISSING when no backend provides it.  Raises ``error``
        when its backend failed."""
        loader = self.loader
        owner = loader.provider(name)
        if owner is not None and self._later_than_this_load(owner):
            return self._value(name)  # not there yet, as in stock's loop
        try:
            with self._hold(owner):
                got = loader.lookup(name)
        except _Cycle:
            return self._value(name)  # not there yet
        if got is None:
            provider = loader.provider(name)
            if provider is not None and loader.status(provider).kind == _native().Kind.native:
                return NativeDevice(name, self._backend(provider).name, loader.table(name))
        value = self._value(name)
        if got is None or got.later:
            return value
        if owner is not None:
            # Its backend did not provide it: never the host's own object of
            # that name instead (torch.xpu for a backend declaring "xpu").
            b = self._backend(owner)
            if b._status().state == _native().State.failed:
                raise error(b.message(name)) from b.cause
            if value is not _MISSING and self.group == TORCH_GROUP and name in _torch_device_types():
                raise error(f'backend {b.name!r} declares device {name!r}, which is PyTorch\'s own '
                            f'device type: {self.host_name}.{name} is PyTorch\'s module, not the '
                            f'backend\'s (rename the backend\'s device)')
            return value
        if value is not _MISSING:
            return value
        b = self._disabled_provider(name)
        if b is None:
            return _MISSING
        if not raise_disabled:
            return _MISSING
        by = b.disabled_by
        if error is BackendError:
            raise error(_disabled_message(b, by))
        raise AttributeError(
            f'module {self.host_name!r} has no attribute {name!r} (its backend '
            f'{b.name!r} is disabled by {by})')

    def _disabled_provider(self, name):
        """The disabled backend that explains why no backend provides
        ``name``, as the core explains it: the first backend (index order)
        that lists ``name`` and is disabled or failed, if it is disabled; a
        disabled backend claims nothing."""
        state = _native().State
        for b in self.backends:
            st = b._status()
            if st.state in (state.disabled, state.failed) and name in st.devices:
                return b if st.state == state.disabled else None
        return None

    def device(self, name):
        return self._lookup(name, BackendError)


class _NoGuard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


_NO_GUARD = _NoGuard()


_TORCH_TYPES = None


def _torch_device_types():
    global _TORCH_TYPES
    if _TORCH_TYPES is None:
        _TORCH_TYPES = frozenset(_native().torch_device_types())
    return _TORCH_TYPES


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
    # The one loop outside the core: its backends come from importlib, which
    # no core Index can hold (a foreign finder, a path that is not a string).
    from importlib.metadata import entry_points
    _, _, enable, disable = _switches(session.group)
    native = _native()
    for ep in entry_points(group=session.group):
        if native.disabled_by(enable, disable, ep.name, ep.dist.name if ep.dist else ''):
            continue
        try:
            ep.load()()
        except Exception as err:
            if session.mode == 'eager':
                raise RuntimeError(native.pytorch_failure_message(session.group, ep.name)) from err
            warn_user(native.failure_message(session.group, ep.name, _cause_text(err)))


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
        raise ValueError('lazy autoload needs a host module to register devices on: pass '
                         'host=__name__ from the host package (or host=<module>), or mode="eager"')
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
        attach = getattr(session.front, 'attach', None)
        if attach is not None:
            attach(session)
        note = session.loader.store_note()
        if note.startswith(_STORE_UNUSABLE):
            # Every later start pays for it: said once, not only under debug.
            warn_user(f'epload: {note} ({session.loader.store_file() or "no file"}): the devices '
                      f'of the {group!r} backends cannot be remembered, so every start imports '
                      'each backend that does not declare its devices; set EPLOAD_CACHE_DIR to a '
                      'directory of your own that you can write')
        elif note:
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
        message += '; failed backends: ' + '; '.join(f'{b.name} ({_cause_text(b.cause)})' for b in failed)
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

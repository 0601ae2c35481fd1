"""Lazy backends inside a real ``import torch``: what torch itself needs
beyond the generic lazy session of ``_autoload``.

The generic session already defers every backend whose devices are known,
runs hooks at once, and wraps ``torch.__getattr__`` (so ``torch.foo``,
``hasattr(torch, "foo")``, ``torch.get_device_module("foo")``,
``torch.accelerator.*`` and ``torch.load(map_location="foo")`` load the
backend of ``foo``).  Torch adds three things (see TORCH.md):

* A device string such as ``"foo"`` parses only once ``foo`` is the
  PrivateUse1 name, and the first tensor on it makes torch's C++ import the
  module ``torch.foo``.  So a probe around every backend load
  (``probe``, this front's) records the PrivateUse1 name a backend itself
  registers as one of its devices, of kind ``privateuse1``, in the core's
  learned-devices store (``epload devices`` lists it); a backend that only
  sets ``torch.foo`` is never taken for one.  A distribution may declare
  the kind (``[epload.devices] foo = "foo [privateuse1]"`` or ``[attr]``);
  a device declared without one loads its backend at ``import torch`` until
  a load has shown its kind, as stock torch loads it.  When exactly one
  backend is known to claim PrivateUse1, its name is registered at the end
  of ``import torch`` and a finder on ``sys.meta_path`` answers
  ``torch.<name>`` until the backend is loaded: its loader's ``exec_module``
  (never ``find_spec``, which runs under the import lock) loads the backend
  and hands the import system the module the backend registered.
  ``EPLOAD_NO_PRIVATEUSE1=a,b`` keeps backends a and b from being
  registered ahead (registration is irreversible and visible:
  ``torch.accelerator.current_accelerator()`` reports it).
* Torch's own loop runs before ``torch._logging._init_logs()``, so a
  ``TORCH_LOGS`` naming a backend's log component works in stock torch.  The
  hook masks ``TORCH_LOGS`` while torch's body runs; afterwards, if torch does
  not know every name in it, the deferred backends are loaded, then the logs
  are initialised with the user's value (an unknown name or ``help`` then
  fails ``import torch`` exactly as stock torch does).
* A backend may set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` while it imports
  (torch_npu does); the lazy session restores it after each load
  (``_autoload.Session._run``).
"""

import _thread
import os
import sys
from types import ModuleType as _ModuleType

from . import _autoload, _trace

PRIVATEUSE1 = 'privateuse1'  # the kind of a learned PrivateUse1 device
NO_PREREGISTER = 'EPLOAD_NO_PRIVATEUSE1'
_DEFAULT_NAME = 'privateuseone'
_SWITCH = 'TORCH_DEVICE_BACKEND_AUTOLOAD'
_LOGS = 'TORCH_LOGS'
_MISSING = object()


def exec_torch(loader, module, group):
    """Runs torch's module body (``loader.exec_module``) with its own loop
    off and ``TORCH_LOGS`` masked, then epload's autoload, then torch's logs
    with the user's ``TORCH_LOGS``."""
    saved = {name: os.environ.get(name) for name in (_SWITCH, _LOGS)}
    os.environ[_SWITCH] = '0'
    os.environ.pop(_LOGS, None)
    try:
        _trace.run_body(loader, module)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # torch is complete: it behaves as if its body ended with the call.
    module.__loader__ = loader
    spec = getattr(module, '__spec__', None)
    if spec is not None:
        spec.loader = loader
    session = _autoload.autoload(group=group, host=module)  # EPLOAD_MODE: read by the core
    if saved[_LOGS] is not None and '_logging' in module.__dict__:  # a real torch
        _init_logs(module, session, saved[_LOGS])
    return session


def _init_logs(torch, session, value):
    """``torch._logging._init_logs()`` with ``TORCH_LOGS=value``, after
    loading the deferred backends if torch does not know a name in it."""
    if session.mode == 'lazy' and session.error is None:
        try:
            torch._logging._internal._parse_log_settings(value)
        except ValueError:
            # A name only a backend registers (or `help`): stock torch has
            # loaded every backend by now.
            for b in session.backends:
                if b.state != 'unloaded':
                    continue
                got = session.loader.load(b.index)
                if got is not None and not got.later:
                    _autoload.warn_user(b.message())
    torch._logging._init_logs()


# ---- PrivateUse1 -------------------------------------------------------------

def _names(variable):
    return {n.strip() for n in os.environ.get(variable, '').split(',')} - {''}


def _privateuse1_name(torch):
    """Torch's PrivateUse1 name; None for a module that is not a real torch
    (read from ``__dict__``: a miss must not reach the lazy ``__getattr__``)."""
    get = getattr(torch.__dict__.get('_C'), '_get_privateuse1_backend_name', None)
    return None if get is None else get()


# Where a backend's own registration of a PrivateUse1 name passes, watched
# while a backend loads: every Python-level rename reaches the C function
# through one of these two names (torch.utils.rename_privateuse1_backend
# calls the one bound in backend_registration).
_RENAMES = (('_C', '_rename_privateuse1_backend'),
            ('utils.backend_registration', '_rename_privateuse1_backend'))
_watch_lock = _thread.allocate_lock()
_watching = []  # [(owner, attribute, original, wrapper)] while a load runs
_watchers = {}  # thread id -> a stack of name lists, one per load running in it


def _owner(torch, path):
    owner = torch
    for part in path.split('.'):
        owner = owner.__dict__.get(part) if isinstance(owner, _ModuleType) else None
    return owner


def _watched(original):
    def rename(name, *args, **kwargs):
        for names in _watchers.get(_thread.get_ident(), ()):
            names.append(name)
        return original(name, *args, **kwargs)
    rename.__wrapped__ = original
    return rename


def _watch(torch):
    """Records the names a load in this thread passes to torch's PrivateUse1
    rename (wrapped only while a load runs anywhere; _unwatch restores)."""
    names = []
    with _watch_lock:
        if not _watchers:
            for path, attribute in _RENAMES:
                owner = _owner(torch, path)
                original = getattr(owner, attribute, None)
                if original is not None:
                    wrapper = _watched(original)
                    setattr(owner, attribute, wrapper)
                    _watching.append((owner, attribute, original, wrapper))
        _watchers.setdefault(_thread.get_ident(), []).append(names)
    return names


def _unwatch(names):
    with _watch_lock:
        me = _thread.get_ident()
        stack = _watchers[me]
        stack.pop()  # loads in one thread end in the reverse order of their start
        if not stack:
            del _watchers[me]
        if not _watchers:
            while _watching:
                owner, attribute, original, wrapper = _watching.pop()
                if getattr(owner, attribute, None) is wrapper:
                    setattr(owner, attribute, original)


def probe(token):
    """The front's probe: ``probe(None)`` before a backend load returns a
    token (the PrivateUse1 name, whether ``torch.<name>`` exists, the names
    the load passes to the rename); ``probe(token)`` after it (also after a
    failed load) returns ``((name, "privateuse1"),)`` when the backend itself
    registered the name: it changed during the load, or, registered before
    (ahead, by epload), the backend renamed to it again or registered its
    module (``torch._register_device_module`` sets ``torch.<name>`` and
    ``sys.modules["torch.<name>"]`` to one module).  A backend that only set
    ``torch.<name>`` registered nothing: it is not learned as PrivateUse1."""
    torch = sys.modules.get('torch')
    name = None if torch is None else _privateuse1_name(torch)
    if token is None:
        if name is None:
            return (None, False, None)
        return (name, name in torch.__dict__, _watch(torch))
    before, had_module, renamed = token
    if renamed is not None:
        _unwatch(renamed)
    if name is None or name == _DEFAULT_NAME:
        return ()
    if name != before or name in renamed:
        return ((name, PRIVATEUSE1),)
    module = torch.__dict__.get(name, _MISSING)
    if not had_module and module is not _MISSING and \
            sys.modules.get(f'{torch.__name__}.{name}') is module:
        return ((name, PRIVATEUSE1),)
    return ()


def _torch_device_type(torch, name):
    """True when ``name`` is one of torch's own device types (it parses
    before any PrivateUse1 name is registered)."""
    try:
        torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        return False
    return True


def claims(session):
    """(backend, PrivateUse1 name) for every enabled backend known to
    register one itself: a device of kind ``privateuse1``, learned by a
    probe that saw the backend register it, or declared so
    (``foo = "foo [privateuse1]"``) while no load of the backend has shown
    otherwise (the core then reports the kinds it registered)."""
    loader = session.loader
    torch = session.host
    disabled = _autoload._native().State.disabled
    found = []
    for i in sorted({d.backend for d in loader.devices()}):
        st = loader.status(i)
        if st.state == disabled:
            continue
        found.extend((session._backend(i), name) for name, kind in zip(st.devices, st.kinds)
                     if kind == PRIVATEUSE1 and not _torch_device_type(torch, name))
    return found


def _load_unknown_kinds(session):
    """Loads now, as stock torch does, each backend with a device its
    distribution declares without a kind (``foo = "foo"``) that no load has
    shown yet: it may register PrivateUse1, which a device string needs
    before any load; its probe learns the kind, and later runs are lazy."""
    for b in session.backends:
        st = session.loader.status(b.index)
        if st.devices_known and _loads_at_import(session, st):
            _autoload._eps._debug(f'backend {b.name!r} declares a device without a kind: loaded '
                                  'at import torch this once')
            got = session.loader.load(b.index)
            if got is not None and not got.later:
                _autoload.warn_user(b.message())


def _loads_at_import(session, st):
    """True when backend status ``st`` is of a backend that loads inside
    ``import torch``: its devices are unknown, or declared without a kind."""
    native = _autoload._native()
    if st.state != native.State.unloaded:
        return False
    if not st.devices_known:
        return True
    declared = native.Source.declared
    return not st.devices_learned and any(
        source == declared and not kind and not _torch_device_type(session.host, name)
        for name, source, kind in zip(st.devices, st.sources, st.kinds))


def _open_claims(session):
    """claims() of the backends not loaded yet and not opted out."""
    out = _names(NO_PREREGISTER)
    return [(b, name) for b, name in claims(session) if b.state == 'unloaded' and b.name not in out]


def _sole_claim(session):
    """(backend, name) of the one backend known to register a PrivateUse1
    name, when it may be registered ahead of its load; else None."""
    found = _open_claims(session)
    return found[0] if len(found) == 1 else None


def before_start(session):
    """Called before the lazy session's start() loads, inside ``import
    torch``, the backends stock torch would have to: stock loads every
    backend in discovery order, so the one PrivateUse1 claimant takes its
    name at its place in that order.  The backends before it that load at
    import are loaded first, then its name is registered ahead; those after
    it load in start() and find the name taken, as in stock."""
    torch = session.host
    if _privateuse1_name(torch) != _DEFAULT_NAME:
        return  # not a real torch, or the name is taken already
    found = _open_claims(session)
    if not found:
        return
    # Several claimants: at most one can have the name, and which one is
    # stock's order's answer, so they load here, in that order.
    last = max(b.index for b, _ in found)
    claimants = {b.index for b, _ in found} if len(found) > 1 else set()
    for i in range(last + 1 if claimants else found[0][0].index):
        if i in claimants or _loads_at_import(session, session.loader.status(i)):
            session.loader.load(i)  # a failure is warned about after start()
    if not claimants and _privateuse1_name(torch) == _DEFAULT_NAME:
        _register_ahead(session, *found[0])


def attach(session):
    """Called at the end of a lazy autoload of ``torch.backends`` on torch:
    loads the backends whose devices' kinds are still unknown, then
    registers the one PrivateUse1 name ahead (unless before_start did) and
    answers ``torch.<name>`` until its backend is loaded."""
    torch = session.host
    if _privateuse1_name(torch) is None:
        return  # not a real torch
    _load_unknown_kinds(session)
    if _privateuse1_name(torch) != _DEFAULT_NAME:
        return  # registered ahead already, or a backend loaded at the start took PrivateUse1
    claim = _sole_claim(session)
    if claim is not None:
        _register_ahead(session, *claim)


def _register_ahead(session, b, name):
    """Registers ``name``, backend ``b``'s PrivateUse1 name, ahead of its
    load, and answers ``torch.<name>`` until it is loaded."""
    torch = session.host
    # Registration is irreversible: the backend's file must be the one that
    # registered the name or declared it (a changed one is loaded now, and
    # learned again).
    got = session.loader.verify(b.index)
    if got is not None and not got.later:
        _autoload.warn_user(b.message())
    if b.state != 'unloaded':
        return
    torch.utils.rename_privateuse1_backend(name)
    _finder().add(f'{torch.__name__}.{name}', b, name)
    _autoload._eps._debug(f'PrivateUse1 is {name!r}: backend {b.name!r} loads at its first use')


class _DeviceModuleFinder:
    """Finds ``torch.<name>`` while the backend of the PrivateUse1 device
    ``name`` is not loaded; the import then loads it (``exec_module``)."""

    def __init__(self):
        self.targets = {}  # module name -> (Backend, device name)

    def __repr__(self):
        return f'<epload finder for {", ".join(self.targets) or "no device module"}>'

    def add(self, fullname, backend, name):
        self.targets[fullname] = (backend, name)

    def find_spec(self, fullname, path=None, target=None):
        got = self.targets.get(fullname)
        if got is None:
            return None
        b, name = got
        # Loaded and registered nothing: there is no such module.  Loaded and
        # registered it: the import system asks finders only after it found
        # no module in sys.modules, a look that may predate the end of a load
        # another thread ran; exec_module then hands over the registered one.
        if b.state == 'ready' and name not in b.session.host.__dict__:
            return None
        from importlib.machinery import ModuleSpec
        return ModuleSpec(fullname, self)

    def invalidate_caches(self):
        pass

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        fullname = module.__name__
        b, name = self.targets[fullname]
        host = b.session.host
        b.ensure(_autoload._BackendAttributeError, name)
        value = host.__dict__.get(name, _MISSING)
        if value is _MISSING:
            raise ImportError(f'backend {b.name!r} ({b.value}) was loaded but registered no '
                              f'module {fullname} ({name!r} was registered as its PrivateUse1 '
                              f'name ahead of its load: it declares that device '
                              f'"[privateuse1]", or registered it on an earlier run); set '
                              f'{NO_PREREGISTER}={b.name} if it does not register it',
                              name=fullname)
        # The module the backend registered, whatever the import system put
        # in its place meanwhile.
        sys.modules[fullname] = value


_the_finder = None


def _finder():
    global _the_finder
    if _the_finder is None:
        _the_finder = _DeviceModuleFinder()
        sys.meta_path.insert(0, _the_finder)
    return _the_finder


# ---- no half-loaded backend ----------------------------------------------------
#
# Stock torch loads every backend inside `import torch`, so no thread ever
# sees one half-loaded.  A lazy load runs at any time, and a backend
# registers its module (torch._register_device_module sets torch.<name> and
# sys.modules["torch.<name>"]) before its kernels: another thread must not
# take it in between.  The import system's own per-module locks keep that
# promise, so a wait here is the wait an import already does:
#
# * The thread that starts a load first takes the lock of torch.<device>
#   for each device the backend is known to provide (hold()): the import of
#   torch.<device> takes the same lock before it reaches the finder above,
#   so every thread takes that lock before the core's load state, never
#   after (no lock-order inversion).  The locks are re-entrant: the loading
#   thread reaches its own module during its load, as backends do.
# * While the load runs (loading()), a module the backend registers is
#   marked initializing (its spec's `_initializing`): another thread's
#   `import torch.<name>`, and torch's C++ device_lazy_init, which imports it,
#   then wait on its lock until the load has finished.  torch.<name> by
#   attribute (`torch.foo`, getattr, hasattr) waits on the same lock: torch's
#   module type is a subclass with a __getattribute__ for the names being
#   loaded, only while a load runs.

import _frozen_importlib as _bootstrap
import _thread

_guard = _thread.allocate_lock()  # the tables below
_guarded = {}  # device name -> how many running loads registered it
_loading = {}  # thread id -> a stack (one per load running in it) of what it marked
_swapped = None  # (host, its own module type) while the type is swapped
_held = {}  # thread id -> the names of the import locks its _Held took, in order
_original_register = None


class _Held:
    """The import locks of ``torch.<device>`` for ``names``, in order.  A
    lock whose taking would close a cycle of threads waiting on each other
    (the import system's own check: two first uses whose inits look up each
    other's devices) is not waited for: the lookup is not there yet
    (``_autoload._Cycle``), as importlib answers a circular import."""

    def __init__(self, host_name, names):
        self.names = [f'{host_name}.{n}' for n in sorted(names)]
        self.managers = []

    def __enter__(self):
        me = _thread.get_ident()
        for name in self.names:
            manager = _bootstrap._ModuleLockManager(name)
            try:
                manager.__enter__()
            except _bootstrap._DeadlockError as err:
                self.__exit__()
                raise _autoload._Cycle(str(err)) from None
            self.managers.append(manager)
            _held.setdefault(me, []).append(name)
        return self

    def __exit__(self, *exc):
        me = _thread.get_ident()
        while self.managers:
            self.managers.pop().__exit__(None, None, None)
            names = _held[me]
            names.pop()
            if not names:
                del _held[me]


def hold(b):
    """The front's hold: what a thread holds before it loads
    backend ``b`` (the locks of its known devices' modules)."""
    return _Held(b.session.host_name, b.devices or ())


def _guarded_type(base):
    class GuardedModule(base):
        __slots__ = ()

        def __getattribute__(self, name):
            if name in _guarded:
                # _bootstrap._lock_unlock_module, but a wait that would close
                # a cycle of threads is "not there yet", never the module
                # another thread is still loading.
                host = base.__getattribute__(self, "__name__")
                lock = _bootstrap._get_module_lock(f'{host}.{name}')
                try:
                    lock.acquire()
                except _bootstrap._DeadlockError:
                    raise AttributeError(f'module {host!r} has no attribute {name!r} (not there yet: '
                                         'its backend is being loaded by a thread that waits for this '
                                         'one)', name=name, obj=self) from None
                lock.release()
            return base.__getattribute__(self, name)

    GuardedModule.__name__ = GuardedModule.__qualname__ = base.__name__
    return GuardedModule


def _register_device_module(device_type, module):
    """torch._register_device_module while a lazy load runs: registers, and
    when the calling thread is loading a backend, marks ``module`` as
    initializing until that load ends."""
    _original_register(device_type, module)
    stack = _loading.get(_thread.get_ident())
    if not stack:
        return
    marks = stack[-1]
    global _swapped
    torch = sys.modules['torch']
    name = torch.device(device_type).type
    spec = module.__dict__.get('__spec__')
    if spec is None:
        from importlib.machinery import ModuleSpec
        spec = ModuleSpec(f'{torch.__name__}.{name}', None)
        module.__spec__ = spec
        marks.append((module, None, name))
    else:
        marks.append((spec, getattr(spec, '_initializing', _MISSING), name))
    spec._initializing = True
    with _guard:
        _guarded[name] = _guarded.get(name, 0) + 1
        if _swapped is None:
            base = type(torch)
            _swapped = (torch, base)
            torch.__class__ = _guarded_type(base)


class _Loading:
    """Around the import and call of a backend in its loading thread."""

    def __init__(self, torch):
        self.torch = torch

    def __enter__(self):
        global _original_register
        torch = self.torch
        with _guard:
            if _original_register is None:
                _original_register = torch._register_device_module
            if torch.__dict__.get('_register_device_module') is _original_register:
                torch._register_device_module = _register_device_module
            _loading.setdefault(_thread.get_ident(), []).append([])

    def __exit__(self, *exc):
        me = _thread.get_ident()
        stack = _loading[me]
        marks = stack.pop()
        for what, was, name in marks:
            if was is None:
                what.__spec__ = None  # the module had none
            elif was is _MISSING:
                del what._initializing
            else:
                what._initializing = was
        with _guard:
            if not stack:
                del _loading[me]
            _release([name for _, _, name in marks], self.torch)


def _release(names, torch):
    """The guards of ``names`` released (under ``_guard``); once no load
    runs, torch's own module type and ``_register_device_module`` back."""
    global _swapped
    for name in names:
        _guarded[name] -= 1
        if not _guarded[name]:
            del _guarded[name]
    if not _guarded and _swapped is not None:
        host, base = _swapped
        host.__class__ = base
        _swapped = None
    if not _loading and torch is not None and \
            torch.__dict__.get('_register_device_module') is _register_device_module:
        torch._register_device_module = _original_register


def _after_fork_in_child():
    """In a fork()ed child: what the parent's other threads held is
    released, since they do not exist here (the core fails their loads).
    Their import locks of ``torch.<device>`` are dropped from the import
    system's table (a new one is made at the next import), with the module
    an import of it had begun; a module their loads registered is removed
    from torch, so that the device's lookup reports the failed load."""
    global _guard
    _guard = _thread.allocate_lock()
    me = _thread.get_ident()
    for tid in [t for t in _held if t != me]:
        for name in _held.pop(tid):
            _bootstrap._module_locks.pop(name, None)
            spec = getattr(sys.modules.get(name), '__spec__', None)
            if spec is not None and spec.loader is _the_finder:
                del sys.modules[name]
    torch = sys.modules.get('torch')
    for tid in [t for t in _loading if t != me]:
        for marks in _loading.pop(tid):
            for what, _, name in marks:  # what: the module, or its spec
                registered = None if torch is None else torch.__dict__.get(name)
                spec = getattr(registered, '__dict__', {}).get('__spec__')
                if registered is not None and (what is registered or what is spec):
                    del torch.__dict__[name]
                    full = f'{torch.__name__}.{name}'
                    if sys.modules.get(full) is registered:
                        del sys.modules[full]
                _release([name], torch)
    _release([], torch)


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Failing:
    """Around ``_Loading``: a load that raises after registering a PrivateUse1
    name leaves the name (PyTorch cannot undo it), so a device string of it
    parses and torch imports ``torch.<name>``: that import then raises the
    backend's error (the finder's exec_module), never "no module"."""

    def __init__(self, b, inner):
        self.b, self.inner = b, inner

    def __enter__(self):
        self.before = _privateuse1_name(self.b.session.host)
        return self.inner.__enter__()

    def __exit__(self, kind, value, tb):
        try:
            return self.inner.__exit__(kind, value, tb)
        finally:
            torch = self.b.session.host
            name = _privateuse1_name(torch)
            if kind is not None and name != self.before and name != _DEFAULT_NAME:
                _finder().add(f'{torch.__name__}.{name}', self.b, name)


def loading(b):
    """The front's loading: the context of backend ``b``'s import
    and call, in its loading thread."""
    torch = b.session.host
    if _privateuse1_name(torch) is None:
        return _autoload._NO_GUARD  # not a real torch
    return _Failing(b, _Loading(torch))


# The PyTorch front of the generic session (its probe, hold, loading and
# attach above), registered when this module is imported.
_autoload.fronts[(_autoload.TORCH_GROUP, 'torch')] = sys.modules[__name__]

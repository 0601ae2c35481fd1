"""Lazy backends inside a real ``import torch``: what torch itself needs
beyond the generic lazy session of ``_autoload``.

The generic session already defers every backend whose devices are known,
runs hooks at once, and wraps ``torch.__getattr__`` (so ``torch.foo``,
``hasattr(torch, "foo")``, ``torch.get_device_module("foo")``,
``torch.accelerator.*`` and ``torch.load(map_location="foo")`` load the
backend of ``foo``).  Torch adds three things (see TORCH.md):

* A device string such as ``"foo"`` parses only once ``foo`` is the
  PrivateUse1 name, and the first tensor on it makes torch's C++ import the
  module ``torch.foo``.  So, when exactly one backend is known to claim
  PrivateUse1 (learned: ``devices-torch.backends-torch.privateuse1.json``, a
  learned store of its own whose entries are ``key -> [stamp, name]``), its
  name is registered at the end of ``import torch`` and a finder on
  ``sys.meta_path`` answers ``torch.<name>`` until the backend is loaded: its
  loader's ``exec_module`` (never ``find_spec``, which runs under the import
  lock) loads the backend and hands the import system the module the backend
  registered.  ``EPLOAD_NO_PRIVATEUSE1=a,b`` keeps backends a and b from being
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
  (``_autoload.Backend._run``).
"""

import os
import sys

from . import _autoload

PRIVATEUSE1_HOST = 'torch.privateuse1'  # the host name of the PrivateUse1 store
NO_PREREGISTER = 'EPLOAD_NO_PRIVATEUSE1'
_DEFAULT_NAME = 'privateuseone'
_SWITCH = 'TORCH_DEVICE_BACKEND_AUTOLOAD'
_LOGS = 'TORCH_LOGS'
_MISSING = object()


def exec_torch(loader, module, group, mode):
    """Runs torch's module body (``loader.exec_module``) with its own loop
    off and ``TORCH_LOGS`` masked, then epload's autoload, then torch's logs
    with the user's ``TORCH_LOGS``."""
    saved = {name: os.environ.get(name) for name in (_SWITCH, _LOGS)}
    os.environ[_SWITCH] = '0'
    os.environ.pop(_LOGS, None)
    try:
        loader.exec_module(module)
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
    session = _autoload.autoload(group=group, host=module, mode=mode)
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
                if b.state == 'unloaded' and b._load() is not None:
                    import warnings
                    warnings.warn(b.message(), RuntimeWarning, stacklevel=2)
            session.store.save()
    torch._logging._init_logs()


# ---- PrivateUse1 -------------------------------------------------------------

def _names(variable):
    return {n.strip() for n in os.environ.get(variable, '').split(',')} - {''}


def _store(session):
    store = getattr(session, '_privateuse1_store', None)
    if store is None:
        store = session._privateuse1_store = _autoload._Store(session.group, PRIVATEUSE1_HOST)
    return store


def _stamp(b):
    return b.stamp or _autoload._stamp_of(b.dist_path)


def claims(session):
    """(backend, PrivateUse1 name) for every enabled backend known to claim
    one: learned for its current stamp, and still among its devices."""
    found = []
    for key, entry in _store(session).entries.items():
        i = session._index_of(key.partition('\x1f')[0])
        if i is None:
            continue
        b = session._backend(i)
        if b.key != key or b.state == 'disabled':
            continue
        names = _autoload._store_devices(entry, _stamp(b))
        if names and len(names) == 1 and b.devices and names[0] in b.devices:
            found.append((b, names[0]))
    return found


def _privateuse1_name(torch):
    """Torch's PrivateUse1 name; None for a module that is not a real torch
    (read from ``__dict__``: a miss must not reach the lazy ``__getattr__``)."""
    get = getattr(torch.__dict__.get('_C'), '_get_privateuse1_backend_name', None)
    return None if get is None else get()


def learn(session):
    """Records which loaded backend registered the current PrivateUse1 name
    (the one that added ``torch.<name>``)."""
    name = _privateuse1_name(session.host)
    if name is None or name == _DEFAULT_NAME:
        return
    for i in list(session.devices.get(name) or ()):
        b = session._backend(i)
        if b.state == 'ready' and b.devices and name in b.devices:
            store = _store(session)
            store.learn(b.key, _stamp(b), (name,))
            store.save()
            return


def attach(session):
    """Called at the end of a lazy autoload of ``torch.backends`` on torch:
    learns what the start loaded, then registers the one PrivateUse1 name
    ahead and answers ``torch.<name>`` until its backend is loaded."""
    torch = session.host
    if _privateuse1_name(torch) is None:
        return
    learn(session)
    import atexit
    atexit.register(learn, session)  # a backend first loaded later in the run
    found = claims(session)
    if len(found) != 1:
        return  # none, or two: registration is irreversible, the first loaded wins
    b, name = found[0]
    if b.state != 'unloaded' or b.name in _names(NO_PREREGISTER):
        return
    if _privateuse1_name(torch) != _DEFAULT_NAME:
        return  # a backend loaded at the start took PrivateUse1
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
        if got is None or got[0].state == 'ready':
            return None  # loaded: what it registered (or nothing) is the answer
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
                              f'module {fullname} (it registered PrivateUse1 {name!r} on an '
                              f'earlier run); set {NO_PREREGISTER}={b.name} if it no longer '
                              'does', name=fullname)
        # The module the backend registered, whatever the import system put
        # in its place meanwhile.
        sys.modules[fullname] = value
        learn(b.session)


_the_finder = None


def _finder():
    global _the_finder
    if _the_finder is None:
        _the_finder = _DeviceModuleFinder()
        sys.meta_path.insert(0, _the_finder)
    return _the_finder

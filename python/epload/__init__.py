"""epload: fast, cached entry-point discovery and lazy backend autoloading.

    import epload
    eps = epload.entry_points(group="torch.backends")   # importlib.metadata's contract
    dists = epload.distributions()                       # the same, for plugin hosts' walks
    epload.autoload(group="torch.backends", host="torch", mode="lazy")
    epload.device("npu")                                 # loads the backend providing it

See docs/python.md.  Importing this package imports nothing heavier than
what the interpreter has loaded at start-up (no importlib.metadata, email,
zipfile, pathlib, re or json); the entry-point machinery is imported at the
first use of one of its names (the .pth hook imports this package in every
process it is on in, most of which never ask), the native index at the
first query, the autoload machinery at the first autoload call.
"""

from ._version import __version__  # written by the build from project(... VERSION)

__all__ = [
    'BackendError',
    'DeviceNotFoundError',
    'EntryPoint',
    'EntryPoints',
    'NativeDevice',
    'SelectableGroups',
    'autoload',
    'backends',
    'device',
    'distribution',
    'distributions',
    'entry_points',
    'get_include',
    'load',
]


def autoload(group='torch.backends', host=None, mode=None):
    """Discovers the backends of ``group`` and loads them: ``"eager"``
    (PyTorch's loop), ``"lazy"`` (each on first use) or ``"off"``.  ``mode``
    None means ``$EPLOAD_MODE``, else ``"lazy"``.  ``host`` is the module (or
    module name) the backends register their devices on.  Returns the
    session (see docs/python.md)."""
    from . import _autoload
    if host == 'torch' or getattr(host, '__name__', None) == 'torch':
        from . import _torch_lazy  # noqa: F401 - registers the PyTorch front
    return _autoload.autoload(group=group, host=host, mode=mode)


def device(name):
    """Loads (once) the backend that provides device ``name`` and returns
    what it registered on its host (``host.<name>``), or, for a native (C
    ABI) backend, a ``NativeDevice`` holding the table it registered."""
    from . import _autoload
    return _autoload.device(name)


def load(name):
    """Loads (once) the backend whose entry point is named ``name``."""
    from . import _autoload
    return _autoload.load(name)


def backends():
    """The backends of every autoload session, in discovery order."""
    from . import _autoload
    return _autoload.backends()


def get_include():
    """The directory holding ``epload/backend.h``, the C ABI of native
    backends, in the installed package (as ``numpy.get_include()``): pass it
    to the compiler (``include_dirs=[epload.get_include()]``)."""
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include')


_ENTRY_POINT_NAMES = ('EntryPoint', 'EntryPoints', 'SelectableGroups', 'entry_points')


def __getattr__(name):
    # importlib.metadata's contract lives in _entry_points (with _types):
    # imported at the first use of one of its names, then kept here.
    if name in _ENTRY_POINT_NAMES:
        from . import _entry_points
        value = getattr(_entry_points, name)
        globals()[name] = value
        return value
    # The error types live with the autoload machinery; importing them from
    # here must not cost anything until they are needed.
    if name in ('BackendError', 'DeviceNotFoundError', 'NativeDevice'):
        from . import _autoload
        return getattr(_autoload, name)
    if name in ('distributions', 'distribution'):
        from . import _distributions
        value = getattr(_distributions, name)
        globals()[name] = value
        return value
    if name == 'torch':
        import importlib
        return importlib.import_module('.torch', __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

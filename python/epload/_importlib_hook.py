"""``EPLOAD_IMPORTLIB=1``: ``importlib.metadata.entry_points`` answered by
epload in every Python process of the environment, with no code change.

Installed by ``epload-autoload.pth`` through ``_hook.install()``.  Most
processes never ask for entry points, so nothing is paid up front: the
switch puts a finder at the front of ``sys.meta_path`` that decorates the
spec of ``importlib.metadata`` (found by the other finders, as usual) so
that, right after the module's own code ran, its ``entry_points`` is
replaced by ``epload.entry_points`` and its ``distributions`` and
``distribution`` by epload's (``distributions`` also gives importlib's
``Distribution.entry_points`` its rows-aware property at its first call:
``_distributions``).  Only then are ``epload._entry_points`` and
``epload._distributions`` imported (pure Python); the native index is
loaded at the first call.  If
``importlib.metadata`` was imported before the hook ran (by another
``.pth``), it is patched at once.

``epload.entry_points`` (and ``epload.distributions``) keep importlib's
original function before the replacement (``_keep_original``) and hand the calls they cannot
answer exactly to it, so importlib's fallback rules hold and a handed-back
call never comes back here.  ``uninstall()`` puts the originals back and
removes the finder; a function replaced again by someone else since stays
theirs.  The finder offers no ``find_distributions``: it never
changes what entry_points() answers.
"""

import sys

from . import _flags
from ._finders import DelegatingLoader, decoratable, spec_from_others

VARIABLE = 'EPLOAD_IMPORTLIB'
_TARGET = 'importlib.metadata'


def wanted():
    """True when ``$EPLOAD_IMPORTLIB`` is on, by epload's one on/off table
    (``_flags``): off when unset; another value is a warning naming the
    variable and its accepted values, and the default (off) applies."""
    return _flags.flag(VARIABLE)


def _patch(md):
    """Replaces ``md.entry_points`` and ``md.distributions`` by epload's
    (their originals kept first)."""
    from . import _distributions as dists
    from . import _entry_points as eps
    if md.entry_points is not eps.entry_points:
        eps._keep_original()
        md.entry_points = eps.entry_points
    if md.distributions is not dists.distributions or md.distribution is not dists.distribution:
        dists._keep_original()
        md.distributions = dists.distributions
        md.distribution = dists.distribution


def _unpatch(md):
    from . import _distributions as dists
    from . import _entry_points as eps
    if md.entry_points is eps.entry_points and eps._original_entry_points is not None:
        md.entry_points = eps._original_entry_points
    for name in ('distributions', 'distribution'):
        if getattr(md, name) is getattr(dists, name) and name in dists._originals:
            setattr(md, name, dists._originals[name])
    dists._uninstall_property(md)


class _MetadataFinder:
    """Finds nothing itself: decorates the spec the other finders return
    for ``importlib.metadata``."""

    def __init__(self):
        self.busy = False

    def __repr__(self):
        return f'<epload {VARIABLE} hook for {_TARGET}>'

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET or self.busy:
            return None
        self.busy = True
        try:
            spec = spec_from_others(self, fullname, path, target)
        finally:
            self.busy = False
        if not decoratable(spec):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


class _Loader(DelegatingLoader):
    """Delegates to the real loader; patches after ``exec_module``."""

    def exec_module(self, module):
        real = self._epload_loader
        real.exec_module(module)
        # The module behaves as if it was loaded by its own loader (its code
        # is read back from it when importlib's original must be rebuilt).
        module.__loader__ = real
        spec = getattr(module, '__spec__', None)
        if spec is not None:
            spec.loader = real
        if _finder is not None:  # not uninstalled meanwhile
            _patch(module)


_finder = None


def install():
    """Patches ``importlib.metadata`` now if it is imported, else when it
    is (idempotent)."""
    global _finder
    if _finder is not None:
        return
    _finder = _MetadataFinder()
    sys.meta_path.insert(0, _finder)
    md = sys.modules.get(_TARGET)
    if md is not None:
        _patch(md)


def uninstall():
    """Removes the finder and gives ``importlib.metadata`` its own
    ``entry_points`` back."""
    global _finder
    if _finder is None:
        return
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass
    _finder = None
    md = sys.modules.get(_TARGET)
    if md is not None:
        _unpatch(md)


def installed():
    """True while the switch is in effect in this process."""
    return _finder is not None

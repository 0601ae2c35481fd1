"""Zero-code-change autoload: run epload.autoload when a host finishes importing.

Installed by ``epload-autoload.pth`` (see docs/python.md), which calls
``install()`` at interpreter start only when ``EPLOAD_AUTOLOAD_HOSTS``,
``EPLOAD_IMPORTLIB`` or ``EPLOAD_TRACE`` is set; otherwise the .pth line costs
three environment lookups.  ``EPLOAD_TRACE`` records every module import of
the process (``_import_trace``).  ``EPLOAD_IMPORTLIB=1`` makes ``importlib.metadata.entry_points``
epload's in every process (``_importlib_hook``).

    EPLOAD_AUTOLOAD_HOSTS=torch                    # group torch.backends
    EPLOAD_AUTOLOAD_HOSTS=myhost=myhost.plugins,torch

For each listed host, a finder at the front of ``sys.meta_path`` lets the
normal finders locate the module, then wraps its loader's ``exec_module`` so
that, right after the host's own code ran, ``epload.autoload(group,
host=module, mode=$EPLOAD_MODE or "lazy")`` runs.  For group
``torch.backends`` the host's own eager loop (PyTorch's) is skipped by
setting ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` while the host module executes;
the user's value is restored before epload's autoload reads it, so the switch
keeps its meaning (``_torch_lazy.exec_torch``, which also keeps
``TORCH_LOGS`` working).  The finder offers no ``find_distributions``: it never
changes what entry_points() answers.
"""

import os
import sys

_TORCH_GROUP = 'torch.backends'


def parse_hosts(text):
    """``"a,b=g"`` -> ``{"a": "torch.backends", "b": "g"}``."""
    hosts = {}
    for item in text.split(','):
        item = item.strip()
        if not item:
            continue
        name, _, group = item.partition('=')
        name, group = name.strip(), group.strip()
        if name:
            hosts[name] = group or _TORCH_GROUP
    return hosts


class _HostFinder:
    """Finds nothing itself: decorates the spec the other finders return for
    a listed host."""

    def __init__(self, hosts):
        self.hosts = dict(hosts)
        self.busy = set()

    def __repr__(self):
        return f'<epload autoload hook for {", ".join(self.hosts) or "no host"}>'

    def find_spec(self, fullname, path=None, target=None):
        group = self.hosts.get(fullname)
        if group is None or fullname in self.busy:
            return None
        self.busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, 'find_spec', None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        spec.loader = _Loader(spec.loader, group)
        return spec

    def invalidate_caches(self):
        pass


class DelegatingLoader:
    """A module's real loader in all but ``exec_module``, which subclasses
    extend (this hook's and ``_importlib_hook``'s)."""

    def __init__(self, loader):
        self._epload_loader = loader

    def __getattr__(self, name):
        return getattr(self._epload_loader, name)

    def create_module(self, spec):
        create = getattr(self._epload_loader, 'create_module', None)
        return None if create is None else create(spec)


class _Loader(DelegatingLoader):
    """Delegates to the real loader; runs the autoload after exec_module."""

    def __init__(self, loader, group):
        super().__init__(loader)
        self._epload_group = group

    def exec_module(self, module):
        # Under EPLOAD_TRACE the host's whole import (its body and the
        # autoload) is one `total` span "import <host>", its body alone
        # "body of <host>" (_trace.run_body): `epload profile` tells the
        # backends loaded during it from those loaded on first use, and the
        # host's own time from epload's.
        from . import _trace
        if not _trace.ON:
            self._exec_and_autoload(module)
            return
        t0 = _trace.now()
        try:
            self._exec_and_autoload(module)
        finally:
            _trace.record('total', f'import {module.__name__}', t0, _trace.now())

    def _exec_and_autoload(self, module):
        group = self._epload_group
        if group == _TORCH_GROUP:
            # Torch's own loop off while its body runs, TORCH_LOGS after the
            # autoload: python/epload/_torch_lazy.py.
            from . import _torch_lazy
            _torch_lazy.exec_torch(self._epload_loader, module, group)
            return
        from . import _trace
        _trace.run_body(self._epload_loader, module)
        # The host is complete: it behaves as if its __init__ ended with the call.
        module.__loader__ = self._epload_loader
        spec = getattr(module, '__spec__', None)
        if spec is not None:
            spec.loader = self._epload_loader
        import epload
        epload.autoload(group=group, host=module)  # EPLOAD_MODE: read by the core


_installed = None


def install():
    """Records imports under EPLOAD_TRACE, and installs the finder for the
    hosts in ``$EPLOAD_AUTOLOAD_HOSTS`` (idempotent).  Hosts imported already are autoloaded at once.  With
    ``EPLOAD_IMPORTLIB=1``, importlib.metadata's ``entry_points`` becomes
    epload's (a bad value is warned about and the switch stays off)."""
    global _installed
    if os.environ.get('EPLOAD_TRACE'):
        from . import _import_trace  # every import of this process, as spans
        _import_trace.install()
    from . import _importlib_hook
    if _importlib_hook.wanted():
        _importlib_hook.install()
    hosts = parse_hosts(os.environ.get('EPLOAD_AUTOLOAD_HOSTS', ''))
    if not hosts or _installed is not None:
        return _installed
    _installed = _HostFinder(hosts)
    sys.meta_path.insert(0, _installed)
    for name, group in hosts.items():
        module = sys.modules.get(name)
        if module is not None:
            import epload
            epload.autoload(group=group, host=module)  # EPLOAD_MODE: read by the core
    return _installed


def uninstall():
    """Removes the finder (hosts imported already keep their autoload) and
    gives importlib.metadata its own ``entry_points`` back."""
    global _installed
    from . import _importlib_hook
    _importlib_hook.uninstall()
    if _installed is not None:
        try:
            sys.meta_path.remove(_installed)
        except ValueError:
            pass
        _installed = None

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

from ._finders import DelegatingLoader, decoratable, spec_from_others

_TORCH_GROUP = 'torch.backends'


def parse_hosts(text, warn=None):
    """``"a,b=g"`` -> ``{"a": "torch.backends", "b": "g"}``.  An item with
    no host or an empty group (``"torch="``) is left out, and said through
    ``warn(text)`` when given."""
    hosts = {}
    for item in text.split(','):
        item = item.strip()
        if not item:
            continue
        name, eq, group = item.partition('=')
        name, group = name.strip(), group.strip()
        if not name or (eq and not group):
            if warn is not None:
                warn(f"EPLOAD_AUTOLOAD_HOSTS item '{item}' is not host or host=group "
                     f"({'no host' if not name else 'an empty group'}): ignored; write "
                     f"'{name or 'torch'}' for group {_TORCH_GROUP}")
            continue
        hosts[name] = group or _TORCH_GROUP
    return hosts


def _check_hosts(hosts, warn):
    """Warns about each listed host that is no module of this interpreter
    (a typo leaves the host's own behaviour in place without a word),
    naming the close module names, as difflib finds them."""
    for name in hosts:
        top = name.partition('.')[0]
        if top in sys.modules or any(
                getattr(f, 'find_spec', None) is not None and f is not _installed
                and f.find_spec(top, None) is not None for f in sys.meta_path):
            continue
        import difflib
        import pkgutil
        names = {m.name for m in pkgutil.iter_modules()} | set(sys.builtin_module_names) | {'torch'}
        close = difflib.get_close_matches(top, sorted(names))
        warn(f"EPLOAD_AUTOLOAD_HOSTS names '{name}', but no module '{top}' is installed for this "
             f"interpreter ({'close: ' + ', '.join(close) if close else 'none is close'}): "
             f"nothing is autoloaded for it")


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
            spec = spec_from_others(self, fullname, path, target)
        finally:
            self.busy.discard(fullname)
        if not decoratable(spec):
            return spec
        spec.loader = _Loader(spec.loader, group)
        return spec

    def invalidate_caches(self):
        pass


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
    if _installed is not None:
        return _installed
    from ._flags import warn_once
    hosts = parse_hosts(os.environ.get('EPLOAD_AUTOLOAD_HOSTS', ''), warn_once)
    if not hosts:
        return _installed
    _check_hosts(hosts, warn_once)
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

"""What epload's two import hooks (``_hook``: a host's autoload;
``_importlib_hook``: ``EPLOAD_IMPORTLIB``) share: each finds nothing itself
and decorates the spec the other finders on ``sys.meta_path`` return for
the module it watches, with a loader that delegates to the real one."""

import sys


def spec_from_others(me, fullname, path, target):
    """The spec the finders on ``sys.meta_path`` other than ``me`` return
    for ``fullname`` (None if none does)."""
    for finder in sys.meta_path:
        if finder is me:
            continue
        find = getattr(finder, 'find_spec', None)
        if find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec
    return None


def decoratable(spec):
    """True when ``spec``'s loader can be wrapped (it has exec_module)."""
    return spec is not None and spec.loader is not None and hasattr(spec.loader, 'exec_module')


class DelegatingLoader:
    """A module's real loader in all but ``exec_module``, which subclasses
    extend (``_hook``'s and ``_importlib_hook``'s)."""

    def __init__(self, loader):
        self._epload_loader = loader

    def __getattr__(self, name):
        return getattr(self._epload_loader, name)

    def create_module(self, spec):
        create = getattr(self._epload_loader, 'create_module', None)
        return None if create is None else create(spec)

"""importlib.metadata-compatible ``distributions()``, answered from epload's index.

Plugin hosts (pluggy, hence pytest and tox; flake8; conda) do not ask
``entry_points()``: they walk ``importlib.metadata.distributions()`` and read
``dist.entry_points`` of every distribution, which costs importlib one read
and one parse of an ``entry_points.txt`` per distribution, per walk.

``distributions(**kwargs)`` yields what importlib's yields: importlib's own
``PathDistribution`` objects for the same metadata directories (``_path``
made as importlib makes it), in the same order, shadowed copies and
``.egg-info`` directories and files included, as an ``itertools.chain``
that looks the search paths up when first iterated, as importlib's does.
What differs is where ``dist.entry_points`` comes from: one native call
(``_native.walk``) returns the listing of every search path with the entry
points of each distribution, from the cached, stat-validated index, and each
distribution made here carries its rows (in its ``__dict__``, under
``_epload_entry_points``).  ``Distribution.entry_points`` is importlib's
property with one change: a distribution that carries rows answers from
them, with importlib's ``EntryPoint``/``EntryPoints`` types and each
``ep.dist`` the distribution itself, as importlib's parse would; every
other distribution (a shadowed copy, which the index never read; one made
by importlib itself; one looked up by name while the index of a walk is
held, whose answer then rests on the search paths' listings alone, their
stamps checked, not on every watched file) runs importlib's own code.  Everything else
(``metadata``, ``name``, ``version``, ``files``, ``requires``,
``read_text``, ``locate_file``) is importlib's, read when asked.  The rows
are those of the call: a file edited after it is read by the next call.

importlib answers instead, by the rules of ``epload.entry_points()``
(``_entry_points``): a foreign distribution finder on ``sys.meta_path``, a
search path that is not a plain ``str``, a distribution importlib would
raise for anywhere on the path, a zip archive with distributions, any
failure of the index, a native module that cannot load here; and a
``context=`` argument or a keyword argument other than ``name`` and
``path``.  ``EPLOAD_DEBUG=1`` says why.
"""

import itertools
import os
import sys

from . import _entry_points as _eps

_MARK = '_epload_entry_points'

_originals = {}  # importlib.metadata's own functions, by name, once needed


def _importlib_function(name):
    """importlib.metadata's own function ``name`` (``distributions``,
    ``distribution``), even where it has been replaced by ours: handing a
    call back must never come back here."""
    original = _originals.get(name)
    if original is None:
        import importlib.metadata as md
        original = getattr(md, name)
        if getattr(original, '__globals__', None) is not md.__dict__:
            original = _eps._defined_function(md, name)
        _originals[name] = original
    return original


def _importlib_distributions(**kwargs):
    """importlib.metadata's own ``distributions(**kwargs)``."""
    return _importlib_function('distributions')(**kwargs)


def _keep_original():
    """Keeps importlib.metadata's ``distributions`` and ``distribution`` if
    it is imported and they are not replaced yet."""
    md = sys.modules.get('importlib.metadata')
    for name in ('distributions', 'distribution'):
        original = getattr(md, name, None)
        if original is not None and getattr(original, '__globals__', None) is md.__dict__:
            _originals[name] = original


# ---- Distribution.entry_points ----------------------------------------------

def _rows_property(md):
    """importlib's ``Distribution.entry_points`` property, answering from the
    rows a distribution made here carries."""
    original = md.Distribution.__dict__['entry_points']
    fget = original.fget
    EntryPoint, EntryPoints = md.EntryPoint, md.EntryPoints
    new = object.__new__
    if sys.version_info >= (3, 11):
        def entry_points(self):
            rows = getattr(self, '__dict__', {}).get(_MARK)
            if rows is None:
                return fget(self)
            # What EntryPoint(name, value, group)._for(self) leaves: the same
            # __dict__, in the same order.
            eps = []
            for name, value, group in rows:
                ep = new(EntryPoint)
                vars(ep).update(name=name, value=value, group=group, dist=self)
                eps.append(ep)
            return EntryPoints(eps)
    else:
        def entry_points(self):
            rows = getattr(self, '__dict__', {}).get(_MARK)
            if rows is None:
                return fget(self)
            return EntryPoints(EntryPoint(*row)._for(self) for row in rows)
    entry_points.__doc__ = fget.__doc__
    entry_points.__qualname__ = fget.__qualname__
    prop = property(entry_points, doc=original.__doc__)
    return prop, original


_installed_property = None  # (ours, importlib's)


def _install_property(md):
    """Puts the rows-aware property on importlib's Distribution (once)."""
    global _installed_property
    current = md.Distribution.__dict__.get('entry_points')
    if _installed_property is not None and current is _installed_property[0]:
        return
    if _installed_property is not None and current is not _installed_property[1]:
        # Replaced by someone else since: theirs stays.
        return
    _installed_property = _rows_property(md)
    md.Distribution.entry_points = _installed_property[0]


def _uninstall_property(md):
    global _installed_property
    if _installed_property is None:
        return
    if md.Distribution.__dict__.get('entry_points') is _installed_property[0]:
        md.Distribution.entry_points = _installed_property[1]
    _installed_property = None


# ---- the walk ---------------------------------------------------------------

def _paths_ok(paths):
    """``(paths, why)``: the search paths as a list when the index can
    answer for them, else None and why importlib must."""
    finder = _eps._foreign_finder()
    if finder is not None:
        return None, f'sys.meta_path holds another distribution finder ({finder!r})'
    try:
        paths = list(paths)
    except TypeError:
        return None, f'path={paths!r} is not a list of paths'
    relative = False
    for p in paths:
        if type(p) is not str or '\0' in p:
            return None, f'the search path holds {p!r}, not a plain path string'
        if not p.startswith('/'):
            relative = True
    if relative:
        try:
            os.getcwdb()
        except OSError as err:
            return None, f'relative search path entry and no current directory ({err})'
    return paths, None


def _found(kwargs):
    """The distributions importlib would yield for ``kwargs`` (``name``,
    ``path``), or importlib's own iterator when it must answer."""
    import importlib.metadata as md
    name = kwargs.get('name')
    paths, why = _paths_ok(kwargs['path'] if 'path' in kwargs else sys.path)
    if paths is None:
        _eps._debug(f'distributions: using importlib.metadata: {why}')
        return _importlib_distributions(**kwargs)
    # A name: only the children importlib's Lookup files under it (the
    # index's listing is in Lookup's order): its *.dist-info and *.egg-info
    # whose key is the name's, then an egg path's EGG-INFO whose legacy key
    # is the name's.  A name Prepared finds falsy ('') selects everything.
    prepared = md.Prepared(name)
    key = prepared.normalized if prepared else None
    if not _eps._native_loads():  # a subinterpreter, a broken install
        return _importlib_distributions(**kwargs)
    native = _eps._native_module()
    status, reason, file, problem, listing = native.walk(
        paths, _eps._validation(), '', _eps._use_cache(), _eps._INTERPRETER, key)
    if not _eps._answered(status, reason, file, problem):
        return _importlib_distributions(**kwargs)
    if len(listing) == len(paths) - 1:
        # The first path holds no metadata (the working directory, usually):
        # the index leaves it out of its key and its paths (cache_key.cpp).
        listing = [()] + list(listing)
    _install_property(md)
    PathDistribution = md.PathDistribution
    Path = md.pathlib.Path
    # PathDistribution(path) runs Distribution.__new__ (3.12 on: a check for
    # abstract methods, which PathDistribution has none of, costing more
    # than the rest of the walk) and __init__ (``self._path = path``): the
    # object is made with the __dict__ they leave.
    new = object.__new__
    # Each _path is the pathlib.Path(root, child) importlib's FastPath joins.
    # Up to 3.11 a Path parses its arguments when made (~8x the cost of the
    # rest); parsing `root` then appending `child` leaves the same state
    # (drive, root, parts), which is what Path._from_parsed_parts(drv, top,
    # parts + [child]) sets on object.__new__(cls): done here inline, without
    # its two Python calls per distribution.
    parsed = sys.version_info < (3, 12)
    out = []
    append = out.append
    for root, children in zip(paths, listing):
        if not children:
            continue
        if parsed:
            base = Path(root)
            cls, drv, top, parts = type(base), base._drv, base._root, base._parts
        egg_key = None
        for child, rows in children:
            if key is not None and len(child) == 8 and child.lower() == 'egg-info':
                if egg_key is None:
                    base = os.path.basename(root).lower()
                    egg_key = md.Prepared.legacy_normalize(base.rpartition('.')[0].partition('-')[0])
                if egg_key != prepared.legacy_normalized:
                    continue
            if parsed:
                path = new(cls)
                path._drv, path._root, path._parts = drv, top, parts + [child]
            else:
                path = Path(root, child)
            dist = new(PathDistribution)
            if rows is None:
                dist.__dict__ = {'_path': path}
            else:
                dist.__dict__ = {'_path': path, _MARK: rows}
            append(dist)
    return out


def distributions(**kwargs):
    """Get all ``Distribution`` instances in the current environment, as
    ``importlib.metadata.distributions(**kwargs)`` does, with
    ``dist.entry_points`` of each answered from epload's index.

    :return: An iterable of ``Distribution`` instances.
    """
    if not kwargs.keys() <= {'name', 'path'}:
        _eps._debug(f'distributions: using importlib.metadata: arguments {sorted(kwargs)}')
        return _importlib_distributions(**kwargs)
    name = kwargs.get('name')
    if name is not None and type(name) is not str:
        _eps._debug(f'distributions: using importlib.metadata: name={name!r} is not a str')
        return _importlib_distributions(**kwargs)
    # Like importlib's, the search paths are looked up when the answer is
    # first iterated (the context reads sys.path then).
    return itertools.chain.from_iterable(_found(kwargs) for _ in (None,))


def distribution(distribution_name):
    """Get the ``Distribution`` instance for the named package, as
    ``importlib.metadata.distribution`` does (the first that
    ``distributions(name=...)`` yields), with its ``entry_points`` from
    epload's index.  ``version()``, ``metadata()``, ``files()`` and
    ``requires()`` of importlib.metadata call it.

    :param distribution_name: The name of the distribution package as a string.
    :return: A ``Distribution`` instance (or subclass thereof).
    """
    if type(distribution_name) is not str or not distribution_name:
        # importlib's own rules for these (a ValueError from 3.11 on).
        return _importlib_function('distribution')(distribution_name)
    for dist in distributions(name=distribution_name):
        return dist
    import importlib.metadata as md
    raise md.PackageNotFoundError(distribution_name)


_keep_original()

"""importlib.metadata-compatible entry points, answered from epload's index.

The contract is the running interpreter's ``importlib.metadata.entry_points()``:
the same selection parameters, the same result types (3.11: ``EntryPoints``, a
list, and for a call without parameters the deprecated ``SelectableGroups``
dict; 3.12 on: ``EntryPoints``, a tuple, for every call), the same order,
and the same exceptions, for the ``sys.path`` of the moment of the call.

The answer comes from one native call (``_native.query``) that returns plain
tuples from a cached, stat-validated index; this module only turns them into
``EntryPoint`` objects.  Where the index cannot promise importlib's exact
answer, the call is handed to importlib.metadata itself, which then answers
(or raises) exactly:

* a finder on ``sys.meta_path`` other than the standard ``PathFinder`` offers
  ``find_distributions`` (importlib would ask it too);
* a ``sys.path`` entry is not a ``str`` (or holds a NUL character);
* the index reports a distribution importlib would raise for (a malformed
  ``entry_points.txt``, invalid UTF-8, a distribution without a name);
* the scanner cannot answer exactly (e.g. a zip archive with distributions
  on the path) or fails for any other reason.

Handing a call back uses importlib's original ``entry_points``, so
``importlib.metadata.entry_points = epload.entry_points`` is supported.
``EPLOAD_DEBUG=1`` prints why to stderr.  Nothing here imports
importlib.metadata, email, zipfile, pathlib, re or warnings until it is
needed (an interpreter started with -S has not imported warnings: 0.4 ms).
The native module is loaded with lazy symbol binding (see _native_module).
"""

import os
import sys

_native = None  # epload._native, imported at the first query

_PathFinder = sys.modules['_frozen_importlib_external'].PathFinder

# The interpreter identity keying the cache, byte for byte what the `epload`
# command computes when it asks an interpreter for its sys.path, so the two
# share cache files.
_INTERPRETER = b'\0'.join(
    os.fsencode(p) for p in (sys.executable, sys.prefix, sys.version))


def _debug_enabled():
    return os.environ.get('EPLOAD_DEBUG', '') not in ('', '0')


def _debug(message):
    if _debug_enabled():
        sys.stderr.write(f'epload: {message}\n')


def _validation():
    """EPLOAD_VALIDATE as the core reads it ('full' or 'paths'); a bad value
    is warned about and the default used."""
    v, warnings = _native_module().validation()
    if warnings:
        _warn_switches(warnings)
    return v


_warned = set()


def _warn_switches(texts, stacklevel=4):
    """Shows each warning about a bad switch value once per process (the
    core's text: it names the variable, the accepted values and the default
    used), as a RuntimeWarning."""
    for text in texts:
        if text not in _warned:
            _warned.add(text)
            import warnings
            warnings.warn(text, RuntimeWarning, stacklevel=stacklevel)


def _foreign_finder():
    """The first finder importlib would also ask for distributions, other
    than the standard PathFinder; None when epload's index is the answer."""
    standard = False
    for finder in sys.meta_path:
        if finder is _PathFinder:
            standard = True
        elif getattr(finder, 'find_distributions', None) is not None:
            return finder
    return None if standard else 'no PathFinder on sys.meta_path'


def _native_module():
    global _native
    if _native is None:
        # Python loads extension modules with RTLD_NOW, which binds every
        # function symbol of the module and of the libraries it pulls in
        # (libstdc++ alone: ~0.7 ms here) before the first call.  Lazy
        # binding resolves only the functions a process calls.
        flags = sys.getdlopenflags()
        lazy = getattr(os, 'RTLD_LAZY', 0)
        now = getattr(os, 'RTLD_NOW', 0)
        try:
            if lazy:
                sys.setdlopenflags((flags & ~now) | lazy)
            from . import _native as native
        finally:
            sys.setdlopenflags(flags)
        # From now on the native query can make the EntryPoint objects
        # itself (objects.hpp); if it declines, _build() makes them.
        native.bind_classes(EntryPoint, _DistRef)
        _native = native
    return _native


def _prepared():
    """``(paths, cwd)`` for a native query of ``sys.path`` as it is now
    (``cwd`` the current directory's bytes when an entry is relative, else
    ``b''``), or None when importlib must answer."""
    finder = _foreign_finder()
    if finder is not None:
        _debug(f'using importlib.metadata: sys.meta_path holds another '
               f'distribution finder ({finder!r})')
        return None
    paths = list(sys.path)
    relative = False
    for p in paths:
        if type(p) is not str or '\0' in p:
            _debug(f'using importlib.metadata: sys.path holds {p!r}, not a plain path string')
            return None
        if not p.startswith('/'):
            relative = True
    cwd = b''
    if relative:
        try:
            cwd = os.getcwdb()
        except OSError as err:
            _debug(f'using importlib.metadata: relative sys.path entry and no '
                   f'current directory ({err})')
            return None
    return paths, cwd


def _use_cache():
    return os.environ.get('EPLOAD_NO_CACHE', '') in ('', '0')


def _answered(status, reason, file, problem):
    """False (and why, under EPLOAD_DEBUG) when importlib must answer."""
    if problem is not None:
        _debug(f'using importlib.metadata: {problem[0]}: {problem[1]}')
        return False
    if _debug_enabled():
        _debug(f'index {status}{": " + reason if reason else ""}'
               f'{" (" + file + ")" if file else ""}')
    return True


def _query(groups, objects=False):
    """Asks the index for the entry points of ``groups`` (None: all, in
    importlib's order; else a tuple of names).  Returns ``(dists, rows)``:
    ``dists`` = ``(name, version, metadata_dir, '')`` tuples with
    ``metadata_dir`` absolute, and ``rows`` = ``(name, value, group,
    dist_position)`` tuples; or None when importlib must answer.  With
    ``objects``, ``dists`` may be None and ``rows`` then a list of
    EntryPoint objects made natively."""
    prepared = _prepared()
    if prepared is None:
        return None
    paths, cwd = prepared
    status, reason, file, problem, dists, rows = _native_module().query(
        paths, groups, _validation(), '', _use_cache(), _INTERPRETER, cwd, objects)
    if not _answered(status, reason, file, problem):
        return None
    return dists, rows


def _entry_point_list(groups):
    """A list of the EntryPoint objects of ``groups`` (as ``_query``), or
    None when importlib must answer."""
    got = _query(groups, objects=True)
    if got is None:
        return None
    dists, rows = got
    return rows if dists is None else _build(dists, rows)


def _open_loader(group, mode, python_loader):
    """The core's Loader (``_native.Loader``) for the backends of ``group``,
    over the index of ``sys.path`` as it is now; None when importlib must
    answer (then the autoload discovers through it)."""
    prepared = _prepared()
    if prepared is None:
        return None
    paths, _ = prepared
    suffixes = list(sys.modules['_frozen_importlib_external'].EXTENSION_SUFFIXES)
    status, reason, file, problem, loader = _native_module().open_loader(
        paths, _validation(), _use_cache(), _INTERPRETER, group, mode, suffixes, python_loader)
    if not _answered(status, reason, file, problem):
        return None
    return loader


_original_entry_points = None  # importlib.metadata's own, once needed


def _importlib_entry_points(**params):
    """importlib.metadata's own ``entry_points(**params)``, even where it has
    been replaced by ours (``importlib.metadata.entry_points =
    epload.entry_points`` is supported): handing a call back must never come
    back here."""
    global _original_entry_points
    original = _original_entry_points
    if original is None:
        import importlib.metadata as md
        original = md.entry_points
        if getattr(original, '__globals__', None) is not md.__dict__:
            original = _defined_entry_points(md)
        _original_entry_points = original
    return original(**params)


def _defined_entry_points(md):
    """The ``entry_points`` function importlib.metadata's code defines, made
    again from the module's code object (its cached bytecode) with the live
    module's globals: the very function the module had before it was
    replaced, its classes and helpers included."""
    import types
    code = md.__spec__.loader.get_code(md.__name__)
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == 'entry_points':
            return types.FunctionType(const, md.__dict__, 'entry_points')
    raise RuntimeError(
        f'epload: cannot find the entry_points function of {md.__file__} '
        f'(importlib.metadata.entry_points was replaced by {md.entry_points!r})')


def _keep_original():
    """Keeps importlib.metadata's ``entry_points`` if it is already imported
    and not replaced yet (the cheap way; _defined_entry_points otherwise)."""
    global _original_entry_points
    md = sys.modules.get('importlib.metadata')
    original = getattr(md, 'entry_points', None)
    if original is not None and getattr(original, '__globals__', None) is md.__dict__:
        _original_entry_points = original


_keep_original()


# ---- entry-point values -----------------------------------------------------

_PATTERN = (
    r'(?P<module>[\w.]+)\s*'
    r'(:\s*(?P<attr>[\w.]+)\s*)?'
    r'((?P<extras>\[.*\])\s*)?$'
)
_compiled = None


def _match(value):
    """importlib's ``EntryPoint.pattern.match(value)`` (None if no match)."""
    global _compiled
    if _compiled is None:
        import re
        _compiled = re.compile(_PATTERN)
    return _compiled.match(value)


def _match_member(value):
    """_match for EntryPoint.module, .attr and .extras, failing on a value
    that does not match as this interpreter's importlib does: from 3.13 on
    with its ``assert`` (so AssertionError, or under -O the AttributeError
    of ``None.group`` that 3.11 and 3.12 always give)."""
    match = _match(value)
    if sys.version_info >= (3, 13):
        assert match is not None
    return match


def _simple(value):
    """``(module, attr or None)`` for the common ``pkg.mod:obj.attr`` form
    (ASCII word characters and dots, one colon, no spaces, no extras), where
    the answer is obviously the pattern's; None otherwise.  Saves importing
    ``re`` (~3 ms) in the autoload path."""
    if type(value) is not str or not value.isascii():
        return None
    module, colon, attr = value.partition(':')
    if not module or (colon and not attr):
        return None
    if not module.replace('.', '').replace('_', '').isalnum():
        return None
    if colon and not attr.replace('.', '').replace('_', '').isalnum():
        return None
    return module, (attr if colon else None)


_osetattr = object.__setattr__


class EntryPoint:
    """An entry point as defined by Python packaging conventions, equal to
    (and interchangeable with) ``importlib.metadata.EntryPoint``.

    ``dist`` is an ``importlib.metadata.PathDistribution`` created on first
    access (importing importlib.metadata then, not before).
    """

    __slots__ = ('name', 'value', 'group', '_dist')

    def __init__(self, name, value, group):
        _osetattr(self, 'name', name)
        _osetattr(self, 'value', value)
        _osetattr(self, 'group', group)
        _osetattr(self, '_dist', None)

    @property
    def pattern(self):
        _match('')
        return _compiled

    @property
    def dist(self):
        d = self._dist
        if d.__class__ is _DistRef:
            return d.get()
        return d

    def load(self):
        """Load the entry point from its definition. If only a module
        is indicated by the value, return that module. Otherwise,
        return the named object.
        """
        from importlib import import_module
        simple = _simple(self.value)
        if simple is not None:
            module = import_module(simple[0])
            attrs = simple[1].split('.') if simple[1] else ()
        else:
            match = _match(self.value)
            module = import_module(match.group('module'))
            attrs = (match.group('attr') or '').split('.')
        for attr in attrs:
            if attr:
                module = getattr(module, attr)
        return module

    @property
    def module(self):
        simple = _simple(self.value)
        if simple is not None:
            return simple[0]
        match = _match_member(self.value)
        return match.group('module')

    @property
    def attr(self):
        simple = _simple(self.value)
        if simple is not None:
            return simple[1]
        match = _match_member(self.value)
        return match.group('attr')

    @property
    def extras(self):
        if _simple(self.value) is not None:
            return []
        import re
        match = _match_member(self.value)
        return re.findall(r'\w+', match.group('extras') or '')

    def _for(self, dist):
        _osetattr(self, '_dist', dist)
        return self

    def __iter__(self):
        """
        Supply iter so one may construct dicts of EntryPoints by name.
        """
        msg = (
            "Construction of dict of EntryPoints is deprecated in "
            "favor of EntryPoints."
        )
        import warnings
        warnings.warn(msg, DeprecationWarning)
        return iter((self.name, self))

    def __getitem__(self, item):
        import warnings
        warnings.warn(
            "EntryPoint tuple interface is deprecated. Access members by name.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._key()[item]

    def matches(self, **params):
        """EntryPoint matches the given parameters (importlib's rule)."""
        attrs = (getattr(self, param) for param in params)
        for expected, actual in zip(params.values(), attrs):
            if not expected == actual:
                return False
        return True

    def _key(self):
        return self.name, self.value, self.group

    def __lt__(self, other):
        return self._key() < other._key()

    def __eq__(self, other):
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __setattr__(self, name, value):
        raise AttributeError("EntryPoint objects are immutable.")

    def __delattr__(self, name):
        raise AttributeError("EntryPoint objects are immutable.")

    def __repr__(self):
        return (
            f'EntryPoint(name={self.name!r}, value={self.value!r}, '
            f'group={self.group!r})'
        )

    def __reduce__(self):
        d = self._dist
        path = None
        if d.__class__ is _DistRef:
            path = d.path
        elif d is not None:
            p = getattr(d, '_path', None)
            path = None if p is None else os.fspath(p)
        return (_restore, (self.name, self.value, self.group, path))


# The tuple interface of an EntryPoint went in two steps: iteration (the
# dict construction) in 3.12, indexing in 3.13.
if sys.version_info >= (3, 12):
    del EntryPoint.__iter__
if sys.version_info >= (3, 13):
    del EntryPoint.__getitem__


def _restore(name, value, group, dist_path):
    ep = EntryPoint(name, value, group)
    if dist_path is not None:
        _osetattr(ep, '_dist', _DistRef(dist_path, None, None, ''))
    return ep


class _DistRef:
    """A distribution known by its metadata directory; materialised as
    importlib's PathDistribution on first use.  Shared by all entry points
    of one distribution in one answer."""

    __slots__ = ('path', 'name', 'version', 'stamp', '_real')

    def __init__(self, path, name, version, stamp):
        self.path = path
        self.name = name  # the index's reading; ep.dist.name asks importlib
        self.version = version
        self.stamp = stamp
        self._real = None

    def get(self):
        real = self._real
        if real is None:
            import pathlib
            from importlib.metadata import PathDistribution
            real = self._real = PathDistribution(pathlib.Path(self.path))
        return real


_new = object.__new__
_set_name = EntryPoint.name.__set__
_set_value = EntryPoint.value.__set__
_set_group = EntryPoint.group.__set__
_set_dist = EntryPoint._dist.__set__


def _entry_point(name, value, group, ref):
    """One EntryPoint of a native row, its distribution ``ref``."""
    ep = _new(EntryPoint)
    _set_name(ep, name)
    _set_value(ep, value)
    _set_group(ep, group)
    _set_dist(ep, ref)
    return ep


def _build(dists, rows):
    """EntryPoint objects for native rows, in order."""
    refs = [_DistRef(path, name, version, stamp)
            for name, version, path, stamp in dists]
    out = []
    append = out.append
    for name, value, group, pos in rows:
        ep = _new(EntryPoint)
        _set_name(ep, name)
        _set_value(ep, value)
        _set_group(ep, group)
        _set_dist(ep, refs[pos])
        append(ep)
    return out


# ---- collections (importlib.metadata's of this interpreter, warnings included) -

def _warn_list():
    import warnings
    warnings.warn(
        "EntryPoints list interface is deprecated. Cast to list if needed.",
        DeprecationWarning,
        stacklevel=3,
    )


class DeprecatedList(list):
    """A list whose mutation is deprecated, as in importlib.metadata."""

    __slots__ = ()

    def __setitem__(self, *args):
        _warn_list()
        return super().__setitem__(*args)

    def __delitem__(self, *args):
        _warn_list()
        return super().__delitem__(*args)

    def append(self, *args):
        _warn_list()
        return super().append(*args)

    def reverse(self, *args):
        _warn_list()
        return super().reverse(*args)

    def extend(self, *args):
        _warn_list()
        return super().extend(*args)

    def pop(self, *args):
        _warn_list()
        return super().pop(*args)

    def remove(self, *args):
        _warn_list()
        return super().remove(*args)

    def __iadd__(self, *args):
        _warn_list()
        return super().__iadd__(*args)

    def insert(self, *args):
        _warn_list()
        return super().insert(*args)

    def sort(self, *args, **kwargs):
        _warn_list()
        return super().sort(*args, **kwargs)

    def __add__(self, other):
        if not isinstance(other, tuple):
            _warn_list()
            other = tuple(other)
        return self.__class__(tuple(self) + other)

    def __eq__(self, other):
        if not isinstance(other, tuple):
            _warn_list()
            other = tuple(other)
        return tuple(self).__eq__(other)

    __hash__ = None


class EntryPoints(DeprecatedList):
    """
    An immutable collection of selectable EntryPoint objects.
    """

    __slots__ = ()

    def __getitem__(self, name):  # -> EntryPoint:
        """
        Get the EntryPoint in self matching name.
        """
        if isinstance(name, int):
            import warnings
            warnings.warn(
                "Accessing entry points by index is deprecated. "
                "Cast to tuple if needed.",
                DeprecationWarning,
                stacklevel=2,
            )
            return super().__getitem__(name)
        try:
            return next(iter(self.select(name=name)))
        except StopIteration:
            raise KeyError(name)

    def select(self, **params):
        """
        Select entry points from self that match the
        given parameters (typically group and/or name).
        """
        return EntryPoints(ep for ep in self if ep.matches(**params))

    @property
    def names(self):
        """
        Return the set of all names of all entry points.
        """
        return {ep.name for ep in self}

    @property
    def groups(self):
        """
        Return the set of all groups of all entry points.
        """
        return {ep.group for ep in self}


if sys.version_info >= (3, 12):
    _ListEntryPoints = EntryPoints

    class EntryPoints(tuple):
        """
        An immutable collection of selectable EntryPoint objects.
        """
        # importlib.metadata's from 3.12 on: a tuple, indexed by name only.

        __slots__ = ()

        def __getitem__(self, name):  # -> EntryPoint:
            """
            Get the EntryPoint in self matching name.
            """
            try:
                return next(iter(self.select(name=name)))
            except StopIteration:
                raise KeyError(name)

        if sys.version_info >= (3, 13):
            def __repr__(self):
                return '%s(%r)' % (self.__class__.__name__, tuple(self))

        select = _ListEntryPoints.select
        names = _ListEntryPoints.names
        groups = _ListEntryPoints.groups


class Deprecated:
    """Mapping behaviour of SelectableGroups is deprecated, as in importlib."""

    def _warn(self):
        import warnings
        warnings.warn(
            "SelectableGroups dict interface is deprecated. Use select.",
            DeprecationWarning,
            stacklevel=3,
        )

    def __getitem__(self, name):
        self._warn()
        return super().__getitem__(name)

    def get(self, name, default=None):
        self._warn()
        return super().get(name, default)

    def __iter__(self):
        self._warn()
        return super().__iter__()

    def __contains__(self, *args):
        self._warn()
        return super().__contains__(*args)

    def keys(self):
        self._warn()
        return super().keys()

    def values(self):
        self._warn()
        return super().values()


class SelectableGroups(Deprecated, dict):
    """
    A backward- and forward-compatible result from
    entry_points that fully implements the dict interface.
    """
    # Python 3.11's only: from 3.12 on, entry_points() returns EntryPoints.

    @classmethod
    def load(cls, eps):
        groups = {}
        for ep in sorted(eps, key=lambda ep: ep.group):
            groups.setdefault(ep.group, []).append(ep)
        return cls((group, EntryPoints(members)) for group, members in groups.items())

    @classmethod
    def _from_sorted(cls, eps):
        # eps arrive grouped and sorted by group already (the index's order).
        out = cls()
        setitem = dict.__setitem__
        start = 0
        n = len(eps)
        while start < n:
            group = eps[start].group
            end = start + 1
            while end < n and eps[end].group == group:
                end += 1
            setitem(out, group, EntryPoints(eps[start:end]))
            start = end
        return out

    @property
    def _all(self):
        """
        Reconstruct a list of all entrypoints from the groups.
        """
        out = EntryPoints()
        for members in dict.values(self):
            list.extend(out, members)
        return out

    @property
    def groups(self):
        return self._all.groups

    @property
    def names(self):
        return self._all.names

    def select(self, **params):
        if not params:
            return self
        return self._all.select(**params)


# ---- the function -------------------------------------------------------------

def entry_points(**params):
    """Return EntryPoint objects for all installed packages.

    Pass selection parameters (group, name, value, module, attr, extras) to
    filter the result (see EntryPoints.select()).  Without parameters the
    result is, as from importlib.metadata, a ``SelectableGroups`` dict of
    group -> EntryPoints on Python 3.11.  From 3.12 on, a call that does
    not select a group is importlib.metadata's own answer.
    """
    if params:
        first = next(iter(params))
        group = params[first] if first == 'group' else None
        if type(group) is str:
            # importlib checks `group` first: entry points of other groups
            # fail the match before any other parameter is looked at, so
            # reading only this group gives the same answer and errors.
            eps = _entry_point_list((group,))
            if eps is None:
                return _importlib_entry_points(**params)
            if len(params) == 1:
                return EntryPoints(eps)
            return EntryPoints(ep for ep in eps if ep.matches(**params))
    if sys.version_info >= (3, 12):
        # From 3.12 on, an answer that spans groups is in discovery order,
        # and within a distribution in the order of the sections of its
        # entry_points.txt, which the index (grouped, as 3.11 wants) does
        # not keep.  Only a selection by group is answered here.
        _debug('entry points of every group: answered by importlib.metadata '
               '(Python 3.12+ orders them as the files do)')
        return _importlib_entry_points(**params)
    if params:
        eps = _entry_point_list(None)
        if eps is None:
            return _importlib_entry_points(**params)
        return EntryPoints(ep for ep in eps if ep.matches(**params))
    eps = _entry_point_list(None)
    if eps is None:
        return _importlib_entry_points()
    return SelectableGroups._from_sorted(eps)

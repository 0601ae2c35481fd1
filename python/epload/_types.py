"""importlib.metadata's types, as the running interpreter defines them:
``EntryPoint``, the collections ``entry_points()`` returns (``EntryPoints``;
on Python 3.11 also ``SelectableGroups``), and the distribution reference
an entry point's ``dist`` resolves through.

Each equals (and is interchangeable with) importlib's: the same attributes,
class hierarchy, selection, ordering, hashing, pickling and deprecation
warnings.  They are made without importing ``re``, importlib.metadata or
pathlib: the pattern is compiled at the first value that needs it, and
``dist`` becomes importlib's ``PathDistribution`` at its first access
(``_DistRef``).  The native query makes EntryPoint objects itself once
_entry_points hands it the two classes (python/src/objects.hpp); else
``_build`` makes them from the query's tuples.
"""

import os
import sys


# ---- the entry point ----------------------------------------------------------

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


def _parts(value):
    """``(module, attr, extras)`` of an entry point's ``value`` as importlib's
    pattern reads them (``attr`` and ``extras``, the ``[...]`` text, may be
    None), failing as importlib does on a value it does not match."""
    simple = _simple(value)
    if simple is not None:
        return simple + (None,)
    return _match_member(value).group('module', 'attr', 'extras')


_osetattr = object.__setattr__


class _EntryPointBehaviour:
    """What importlib's EntryPoint does in every version: parsing the value,
    loading, matching, the deprecated iteration, pickling.  The classes
    below add each version's shape."""

    __slots__ = ()

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
        return _parts(self.value)[0]

    @property
    def attr(self):
        return _parts(self.value)[1]

    @property
    def extras(self):
        extras = _parts(self.value)[2]
        if not extras:
            return []
        import re
        return re.findall(r'\w+', extras)

    def _for(self, dist):
        _osetattr(self, '_dist', dist)
        return self

    def matches(self, **params):
        """EntryPoint matches the given parameters (importlib's rule)."""
        attrs = (getattr(self, param) for param in params)
        for expected, actual in zip(params.values(), attrs):
            if not expected == actual:
                return False
        return True

    def __reduce__(self):
        d = self._dist
        path = None
        if d.__class__ is _DistRef:
            path = d.path
        elif d is not None:
            p = getattr(d, '_path', None)
            path = None if p is None else os.fspath(p)
        return (_restore, (self.name, self.value, self.group, path))

    if sys.version_info < (3, 12):
        # The dict construction, deprecated; gone in 3.12.
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


if sys.version_info >= (3, 11):
    class EntryPoint(_EntryPointBehaviour):
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

        if sys.version_info < (3, 13):
            # The tuple interface's indexing, deprecated; gone in 3.13.
            def __getitem__(self, item):
                import warnings
                warnings.warn(
                    "EntryPoint tuple interface is deprecated. Access members by name.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return self._key()[item]

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
else:
    from collections import namedtuple as _namedtuple

    class EntryPoint(_EntryPointBehaviour, _namedtuple('EntryPointBase', 'name value group')):
        """An entry point as defined by Python packaging conventions, equal to
        (and interchangeable with) ``importlib.metadata.EntryPoint``.

        Python 3.10's is a named tuple (name, value, group): a tuple in every
        respect (length, indexing, comparison, hashing), whose ``dist`` may
        be set.  ``dist`` is an ``importlib.metadata.PathDistribution``
        created on first access.
        """

        _dist = None

        def _set(self, dist):
            self._dist = dist

        dist = property(_EntryPointBehaviour.dist.fget, _set)
        del _set

    _new_tuple = tuple.__new__

    def _entry_point(name, value, group, ref):
        """One EntryPoint of a native row, its distribution ``ref``."""
        ep = _new_tuple(EntryPoint, (name, value, group))
        ep._dist = ref
        return ep


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


def _build(dists, rows):
    """EntryPoint objects for native rows, in order."""
    refs = [_DistRef(path, name, version, stamp)
            for name, version, path, stamp in dists]
    return [_entry_point(name, value, group, refs[pos]) for name, value, group, pos in rows]


# ---- the collections (the deprecated list and dict interfaces are tables of
# method names, each wrapped to warn, as importlib.metadata itself writes them) -

_LIST_DEPRECATED = "EntryPoints list interface is deprecated. Cast to list if needed."
_DICT_DEPRECATED = "SelectableGroups dict interface is deprecated. Use select."


def _warn(message):
    """A DeprecationWarning attributed to the caller of the method that
    calls this."""
    import warnings
    warnings.warn(message, DeprecationWarning, stacklevel=3)


def _deprecate(cls, names, message):
    """Makes each method of ``names`` on ``cls`` warn ``message`` before it
    runs the method of the class after ``cls`` in the instance's MRO (what
    ``super()`` would call from a method written in ``cls``)."""
    def warned(name):
        def method(self, *args, **kwargs):
            _warn(message)
            return getattr(super(cls, self), name)(*args, **kwargs)
        method.__name__ = name
        method.__qualname__ = f'{cls.__name__}.{name}'
        return method
    for name in names:
        setattr(cls, name, warned(name))


class DeprecatedList(list):
    """A list whose mutation is deprecated, as in importlib.metadata."""

    __slots__ = ()

    def __add__(self, other):
        if not isinstance(other, tuple):
            _warn(_LIST_DEPRECATED)
            other = tuple(other)
        return self.__class__(tuple(self) + other)

    def __eq__(self, other):
        if not isinstance(other, tuple):
            _warn(_LIST_DEPRECATED)
            other = tuple(other)
        return tuple(self).__eq__(other)

    __hash__ = None


_deprecate(DeprecatedList,
           ('__setitem__', '__delitem__', 'append', 'reverse', 'extend', 'pop', 'remove',
            '__iadd__', 'insert', 'sort'),
           _LIST_DEPRECATED)


def _named(eps, name):
    """The first entry point of ``eps`` named ``name``; KeyError if none."""
    try:
        return next(iter(eps.select(name=name)))
    except StopIteration:
        raise KeyError(name)


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
        return _named(self, name)

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
            return _named(self, name)

        if sys.version_info >= (3, 13):
            def __repr__(self):
                return '%s(%r)' % (self.__class__.__name__, tuple(self))

        select = _ListEntryPoints.select
        names = _ListEntryPoints.names
        groups = _ListEntryPoints.groups


class Deprecated:
    """Mapping behaviour of SelectableGroups is deprecated, as in importlib."""

    def get(self, name, default=None):
        _warn(_DICT_DEPRECATED)
        return super().get(name, default)


_deprecate(Deprecated, ('__getitem__', '__iter__', '__contains__', 'keys', 'values'),
           _DICT_DEPRECATED)


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

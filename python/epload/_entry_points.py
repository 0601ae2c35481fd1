"""importlib.metadata-compatible entry points, answered from epload's index.

The contract is the running interpreter's ``importlib.metadata.entry_points()``:
the same selection parameters, the same result types (3.11: ``EntryPoints``, a
list, and for a call without parameters the deprecated ``SelectableGroups``
dict; 3.12 on: ``EntryPoints``, a tuple, for every call), the same order,
and the same exceptions, for the ``sys.path`` of the moment of the call.

The answer comes from one native call (``_native.query``) that returns the
EntryPoint objects (``_types``), or plain tuples to make them from, out of a
cached, stat-validated index; this module asks it and wraps the answer in
importlib's collections (``_types`` too).  Where the index cannot promise
importlib's exact answer, the call is handed to importlib.metadata itself,
which then answers (or raises) exactly:

* a finder on ``sys.meta_path`` other than the standard ``PathFinder`` offers
  ``find_distributions`` (importlib would ask it too);
* a ``sys.path`` entry is not a ``str`` (or holds a NUL character);
* the index reports a distribution importlib would raise for (a malformed
  ``entry_points.txt``, invalid UTF-8, a distribution without a name);
* the scanner cannot answer exactly (e.g. a zip archive with distributions
  on the path) or fails for any other reason;
* the native module cannot load (a subinterpreter, legacy or isolated).

Handing a call back uses importlib's original ``entry_points``, so
``importlib.metadata.entry_points = epload.entry_points`` is supported.
``EPLOAD_DEBUG=1`` prints why to stderr.  Nothing here imports
importlib.metadata, email, zipfile, pathlib, re or warnings until it is
needed (an interpreter started with -S has not imported warnings: 0.4 ms).
"""

import os
import sys

from . import _flags
from ._types import EntryPoint, EntryPoints, SelectableGroups, _DistRef, _build

_native = None  # epload._native, imported at the first query

_PathFinder = sys.modules['_frozen_importlib_external'].PathFinder

# The interpreter identity keying the cache, byte for byte what the `epload`
# command computes when it asks an interpreter for its sys.path, so the two
# share cache files.
_INTERPRETER = b'\0'.join(
    os.fsencode(p) for p in (sys.executable, sys.prefix, sys.version))


def _debug_enabled():
    return _flags.flag('EPLOAD_DEBUG')


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


def _warn_switches(texts):
    """Shows each warning about a bad switch value once per process (the
    core's text: it names the variable, the accepted values and the default
    used), as a RuntimeWarning at the user's line."""
    for text in texts:
        _flags.warn_once(text)


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
        # With the interpreter's own dlopen flags: they are process-wide,
        # and another thread importing an extension while they were changed
        # here would load it with them (BENCHMARKS.md: what lazy binding saved).
        from . import _native as native
        if not native.in_main_interpreter():
            # A module made in the main interpreter, handed to this
            # subinterpreter without its init (native.cpp says why not).
            raise ImportError('epload._native cannot be used in a subinterpreter (it works in '
                              'the main interpreter only)')
        # From now on the native query can make the EntryPoint objects
        # itself (objects.hpp); if it declines, _build() makes them.
        native.bind_classes(EntryPoint, _DistRef)
        _native = native
    return _native


_native_error = None  # why the native module cannot load here, once known


def _native_loads():
    """True when the native module is (or can be) loaded.  It cannot be in
    a subinterpreter (it refuses every one, legacy or isolated), nor in a
    broken install;
    importlib answers then, and EPLOAD_DEBUG says why."""
    global _native_error
    if _native is not None:
        return True
    if _native_error is None:
        try:
            _native_module()
            return True
        except ImportError as err:
            _native_error = f'{type(err).__name__}: {err}'
    _debug(f'using importlib.metadata: epload\'s native module cannot load here ({_native_error})')
    return False


def _prepared():
    """``(paths, cwd)`` for a native query of ``sys.path`` as it is now
    (``cwd`` the current directory's bytes when an entry is relative, else
    ``b''``), or None when importlib must answer."""
    if not _native_loads():
        return None
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
    return not _flags.flag('EPLOAD_NO_CACHE')


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
    """The ``entry_points`` function importlib.metadata's code defines (see
    _defined_function)."""
    return _defined_function(md, 'entry_points')


def _defined_function(md, name):
    """The function ``name`` importlib.metadata's code defines, made again
    from the module's code object (its cached bytecode) with the live
    module's globals: the very function the module had before it was
    replaced, its classes and helpers included."""
    import types
    code = md.__spec__.loader.get_code(md.__name__)
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return types.FunctionType(const, md.__dict__, name)
    raise RuntimeError(
        f'epload: cannot find the {name} function of {md.__file__} '
        f'(importlib.metadata.{name} was replaced by {getattr(md, name)!r})')


def _keep_original():
    """Keeps importlib.metadata's ``entry_points`` if it is already imported
    and not replaced yet (the cheap way; _defined_entry_points otherwise)."""
    global _original_entry_points
    md = sys.modules.get('importlib.metadata')
    original = getattr(md, 'entry_points', None)
    if original is not None and getattr(original, '__globals__', None) is md.__dict__:
        _original_entry_points = original


_keep_original()


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

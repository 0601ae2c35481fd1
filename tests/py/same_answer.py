"""epload.entry_points() and importlib.metadata.entry_points() (the oracle)
asked the same question in this interpreter, and their answers compared:
the result's type, its entry points and their distributions, or the
exception raised.
"""

import contextlib
import csv  # noqa: F401 - see below
import email.message  # noqa: F401
import importlib.metadata as im
import os
import sys
import warnings
import zipfile  # noqa: F401

import epload

# The comparisons replace sys.path by the test's directories alone, so what
# importlib.metadata imports lazily (3.13: email.message for a METADATA read,
# through importlib.metadata._adapters) must be imported before: else the
# first side to need it raises ModuleNotFoundError and the other does not.
try:
    import importlib.metadata._adapters  # noqa: F401
except ImportError:  # not in every version
    pass

# The selections assert_same_everywhere() tries, the bad ones included.
ALL_PARAMS = [
    {},
    {'group': 'console_scripts'},
    {'group': 'g1'},
    {'group': 'g1', 'name': 'a'},
    {'name': 'a'},
    {'name': 'a', 'group': 'g2'},
    {'value': 'mod_a:f'},
    {'module': 'mod_a'},
    {'attr': 'f'},
    {'extras': ['x', 'y']},
    {'group': 'nope'},
    {'group': None},
    {'group': 'g1', 'bogus': 1},
    {'bogus': 1},
]


@contextlib.contextmanager
def search_path(paths):
    saved = sys.path[:]
    sys.path[:] = [str(p) for p in paths]
    try:
        yield
    finally:
        sys.path[:] = saved


def outcome(fn, **params):
    """What a call gives: ('ok', shape) or ('raise', type, text)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        try:
            result = fn(**params)
        except Exception as e:  # noqa: BLE001 - the exception is the answer
            return ('raise', type(e).__name__, str(e))
        return ('ok', shape(result))


def shape(result):
    if isinstance(result, dict):  # SelectableGroups
        return ('groups', type(result).__name__,
                [(g, [ep_shape(ep) for ep in dict.__getitem__(result, g)]) for g in dict.keys(result)])
    return (type(result).__name__, [ep_shape(ep) for ep in result])


def ep_shape(ep):
    # importlib keeps a relative path for a relative sys.path entry; epload
    # resolves it when the call is made (the same file, robust to chdir).
    path = ep.dist._path
    path = os.path.abspath(path) if isinstance(path, os.PathLike) else str(path)

    def attr(name):  # an unreadable METADATA raises here, in importlib too
        try:
            return getattr(ep.dist, name)
        except Exception as e:  # noqa: BLE001 - the exception is the answer
            return ('raise', type(e).__name__)
    return (ep.name, ep.value, ep.group, path, attr('name'), attr('version'))


def assert_same(paths, **params):
    with search_path(paths):
        ours = outcome(epload.entry_points, **params)
        theirs = outcome(im.entry_points, **params)
    assert ours == theirs
    return ours


def assert_same_everywhere(paths):
    for params in ALL_PARAMS:
        assert_same(paths, **params)

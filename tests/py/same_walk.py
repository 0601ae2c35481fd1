"""epload.distributions() and importlib.metadata.distributions() (the oracle)
walked the way plugin hosts walk them, in this interpreter, and compared:
the objects' types and metadata paths in order, and each distribution's
entry points (types, fields, order, ``ep.dist`` the distribution itself),
or the exception raised.
"""

import warnings

import importlib.metadata as im

import epload
from same_answer import search_path  # noqa: F401 - re-exported for the tests

# importlib's own, whatever the switch did to the module.
from epload._distributions import _importlib_distributions


def dist_shape(dist):
    """What a host sees of one distribution."""
    path = dist._path
    try:
        eps = dist.entry_points
    except Exception as e:  # noqa: BLE001 - the exception is the answer
        eps_shape = ('raise', type(e).__name__, str(e))
    else:
        eps_shape = (type(eps).__module__, type(eps).__name__,
                     [(type(ep).__module__, type(ep).__name__, ep.name, ep.value, ep.group,
                       ep.dist is dist, sorted(vars(ep)) if hasattr(ep, '__dict__') else None)
                      for ep in eps])
    return (type(dist).__module__, type(dist).__name__, type(path).__name__, str(path),
            path.parts if hasattr(path, 'parts') else None, eps_shape)


def walk(fn, **kwargs):
    """('ok', iterator type, [dist shapes]) or ('raise', type, text)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        try:
            it = fn(**kwargs)
            return ('ok', type(it).__name__, [dist_shape(d) for d in it])
        except Exception as e:  # noqa: BLE001 - the exception is the answer
            return ('raise', type(e).__name__, str(e))


def assert_same_walk(paths=None, **kwargs):
    """Both walks of ``paths`` (as sys.path; None: as it is) agree."""
    if paths is None:
        ours, theirs = walk(epload.distributions, **kwargs), walk(_importlib_distributions, **kwargs)
    else:
        with search_path(paths):
            ours = walk(epload.distributions, **kwargs)
            theirs = walk(_importlib_distributions, **kwargs)
    assert ours == theirs
    return ours


_ = im  # importlib.metadata is imported before any sys.path swap

"""Runs CPython's own importlib.metadata tests (Debian's libpython3.X-testsuite
for the running interpreter, or the `test` package a pyenv build installs)
with ``importlib.metadata.entry_points = epload.entry_points`` and
``importlib.metadata.distributions = epload.distributions`` in place before
any test module is imported, and prints one JSON line: the unittest outcome
and proof that the patches were in effect (calls that epload answered from
its index, and calls it handed back to importlib's originals).  Used by
test_cpython_metadata_suite.py.

With ``--from-env`` nothing is assigned: the interpreter was started with
``EPLOAD_IMPORTLIB=1`` and epload's installed ``.pth`` hook must have made
the replacement itself (tests/package/test_importlib_switch.py)."""

import importlib
import importlib.metadata
import io
import json
import pathlib
import sys
import unittest

import epload
from epload import _distributions as dists
from epload import _entry_points as eps

FROM_ENV = '--from-env' in sys.argv[1:]
if not FROM_ENV:
    importlib.metadata.entry_points = epload.entry_points
    importlib.metadata.distributions = epload.distributions

counts = {'answered': 0, 'handed_back': 0}
_list, _handback = eps._entry_point_list, eps._importlib_entry_points


def _counted_list(groups):
    got = _list(groups)
    if got is not None:
        counts['answered'] += 1
    return got


def _counted_handback(**params):
    counts['handed_back'] += 1
    return _handback(**params)


eps._entry_point_list = _counted_list
eps._importlib_entry_points = _counted_handback

walks = {'answered': 0, 'handed_back': 0}
_found, _walk_handback = dists._found, dists._importlib_distributions


def _counted_found(kwargs):
    got = _found(kwargs)
    if isinstance(got, list):
        walks['answered'] += 1
    return got


def _counted_walk_handback(**kwargs):
    walks['handed_back'] += 1
    return _walk_handback(**kwargs)


dists._found = _counted_found
dists._importlib_distributions = _counted_walk_handback


def suite_modules():
    """The test modules of test.test_importlib (and, from 3.12, its metadata
    subpackage) that exercise importlib.metadata."""
    import test.test_importlib as pkg
    root = pathlib.Path(pkg.__file__).parent
    names = []
    for path in sorted(root.glob('test_*.py')) + sorted(root.glob('metadata/test_*.py')):
        if 'importlib.metadata' in path.read_text(encoding='utf-8'):
            rel = path.relative_to(root).with_suffix('')
            names.append('test.test_importlib.' + '.'.join(rel.parts))
    return names


def main():
    names = suite_modules()
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromModule(importlib.import_module(n)) for n in names)
    out = io.StringIO()
    result = unittest.TextTestRunner(stream=out, verbosity=1).run(suite)
    print(json.dumps({
        'python': sys.version,
        'modules': names,
        'run': result.testsRun,
        'skipped': len(result.skipped),
        'failures': [t.id() + '\n' + tb for t, tb in result.failures + result.errors],
        'from_env': FROM_ENV,
        'still_patched': importlib.metadata.entry_points is epload.entry_points
        and importlib.metadata.distributions is epload.distributions,
        'counts': counts,
        'walks': walks,
        'log': out.getvalue()[-4000:],
    }))


if __name__ == '__main__':
    main()

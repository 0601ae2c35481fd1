"""scikit-build-core's build tree for ``pip install <checkout>``, one per
interpreter, shared by every venv made from it.

The torch venv and the packaging tests' venvs of one interpreter install
the same checkout with the same flags: in one tree, the second install
recompiles nothing (pip's build environment changes its own paths only).
A CI run from nothing installed into three venvs of Debian's python3 and
compiled the extension and the command three times.  Two builds in one tree
at once delete each other's objects, so a lock beside the tree makes them
take turns.
"""

import contextlib
import fcntl
import os
import pathlib
import re


@contextlib.contextmanager
def checkout_tree(build, python):
    """Holds the tree for ``python`` (a venv's interpreter or the one it was
    made from: the file it runs names the tree) under ``build``/skbuild and
    yields its path."""
    real = os.path.realpath(python)
    tree = pathlib.Path(build) / 'skbuild' / re.sub(r'[^A-Za-z0-9]+', '_', real).strip('_')
    tree.parent.mkdir(parents=True, exist_ok=True)
    with open(f'{tree}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield tree

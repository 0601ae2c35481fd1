"""torch_nolib: a backend whose import loads its extension module
``torch_nolib._nolib``, linked against ``libepload_nolib_dep.so``, a library
that is not installed (as a vendor backend on a machine without its driver
or toolkit).  The extension is compiled by tests/torch/nolib_build.py from
tests/torch/nolib_src/ into the test's copy of this directory."""

import epload_torch_fixture as _fixture

_fixture.record('nolib', 'import')

from . import _nolib  # noqa: E402  dlopen fails: libepload_nolib_dep.so is absent


def _autoload():
    import torch
    _fixture.record('nolib', 'entry_point')
    torch.nolib_answer = _nolib.answer()

"""parity_ptwo: a second PrivateUse1 device, ``ptwo`` (PyTorch has one
PrivateUse1 name per process: whichever registers second fails)."""

import parity_fixture as _fixture

_fixture.record('ptwo', 'import')
runtime = _fixture.privateuse1('ptwo', __name__)


def _autoload():
    _fixture.record('ptwo', 'entry_point')

"""torch_bar: an attribute device only: ``torch.bar`` (no PrivateUse1)."""

import torch

import epload_torch_fixture as _fixture

_fixture.record('bar', 'import')


def ping():
    return 'bar'


torch.bar = __import__(__name__)


def _autoload():
    _fixture.record('bar', 'entry_point')

"""torch_toy: an attribute-only device ``toy`` (``torch.toy``, no PrivateUse1),
as the README's example backend is, declared in its distribution's
``epload.devices`` (``toy = toy``: no kind; a test may rewrite it)."""

import types

import torch

import epload_torch_fixture as _fixture

_fixture.record('toy', 'import')

torch.toy = types.SimpleNamespace(is_available=lambda: True, ping=lambda: 'toy')


def _autoload():
    _fixture.record('toy', 'entry_point')

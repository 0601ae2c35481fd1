"""torch_selfcheck: its registration checks ``hasattr(torch, "selfcheck")``
itself and refuses to register twice (as ``torch._register_device_module``
does), then adds ``torch.selfcheck``."""

import torch

import epload_torch_fixture as _fixture

_fixture.record('selfcheck', 'import')
if hasattr(torch, 'selfcheck'):
    raise RuntimeError('torch.selfcheck is already registered')
torch.selfcheck = __import__(__name__)


def _autoload():
    _fixture.record('selfcheck', 'entry_point')

"""parity_pb: its import probes the other backend's device (``hasattr(torch,
"pa")``), then adds ``torch.pb``."""

import torch

import parity_fixture as _fixture

_fixture.record('pb', 'import')
_fixture.record('pb', 'probe_pa_' + str(hasattr(torch, 'pa')).lower())
torch.pb = __import__(__name__)


def _autoload():
    _fixture.record('pb', 'entry_point')

"""parity_pa: its import probes the other backend's device (``hasattr(torch,
"pb")``), then adds ``torch.pa``."""

import torch

import parity_fixture as _fixture

_fixture.record('pa', 'import')
_fixture.record('pa', 'probe_pb_' + str(hasattr(torch, 'pb')).lower())
torch.pa = __import__(__name__)


def _autoload():
    _fixture.record('pa', 'entry_point')

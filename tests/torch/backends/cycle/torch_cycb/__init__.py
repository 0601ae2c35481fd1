"""torch_cycb: the attribute device torch.cycb, whose init looks up
torch.cyca (the other half of the cycle fixture) when EPLOAD_TEST_CYCLE=1:
both inits meet first, so each waits for the other's."""

import os

import torch

import epload_gate
import epload_torch_fixture as _fixture

_fixture.record('cycb', 'import')
if os.environ.get('EPLOAD_TEST_CYCLE') == '1':
    epload_gate.barrier.wait()
    epload_gate.seen['cycb'] = hasattr(torch, 'cyca')
torch.cycb = __import__(__name__)


def _autoload():
    _fixture.record('cycb', 'entry_point')

"""torch_cyca: the attribute device torch.cyca, whose init looks up
torch.cycb (the other half of the cycle fixture) when EPLOAD_TEST_CYCLE=1:
both inits meet first, so each waits for the other's."""

import os

import torch

import epload_gate
import epload_torch_fixture as _fixture

_fixture.record('cyca', 'import')
if os.environ.get('EPLOAD_TEST_CYCLE') == '1':
    epload_gate.barrier.wait()
    epload_gate.seen['cyca'] = hasattr(torch, 'cycb')
torch.cyca = __import__(__name__)


def _autoload():
    _fixture.record('cyca', 'entry_point')

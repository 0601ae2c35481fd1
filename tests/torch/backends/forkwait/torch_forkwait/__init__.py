"""torch_forkwait: the attribute device torch.fwait, whose init (with
EPLOAD_TEST_FORK_WAIT=1) says it started and waits to be released: a test
forks while it waits."""

import os

import torch

import epload_gate
import epload_torch_fixture as _fixture

_fixture.record('fwait', 'import')
if os.environ.get('EPLOAD_TEST_FORK_WAIT') == '1':
    epload_gate.started.set()
    epload_gate.release.wait()
torch.fwait = __import__(__name__)


def _autoload():
    _fixture.record('fwait', 'entry_point')

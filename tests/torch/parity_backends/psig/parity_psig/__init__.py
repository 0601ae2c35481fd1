"""parity_psig: its import sends the signal named by ``$PARITY_SIGNAL``
(``SIGINT``, ``SIGTERM``) to its own process, as a user's Ctrl-C or a
supervisor's stop arriving during the load; then adds ``torch.psig``."""

import os
import signal

import torch

import parity_fixture as _fixture

_fixture.record('psig', 'import')
os.kill(os.getpid(), getattr(signal, os.environ.get('PARITY_SIGNAL', 'SIGINT')))
_fixture.record('psig', 'survived')
torch.psig = __import__(__name__)


def _autoload():
    _fixture.record('psig', 'entry_point')

"""torch_switchoff: sets ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` while it imports
and leaves it so, as torch_npu does to avoid a circular autoload; adds the
attribute device ``torch.switchoff``."""

import os

os.environ['TORCH_DEVICE_BACKEND_AUTOLOAD'] = '0'

import torch  # noqa: E402

import epload_torch_fixture as _fixture  # noqa: E402

_fixture.record('switchoff', 'import')
torch.switchoff = __import__(__name__)


def _autoload():
    _fixture.record('switchoff', 'entry_point')

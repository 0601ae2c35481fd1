"""parity_fattr: sets ``torch.fattr`` (an attribute device), then fails."""

import types

import torch

import parity_fixture as _fixture

_fixture.record('fattr', 'import')
torch.fattr = types.ModuleType('parity_fattr.device')
raise RuntimeError('parity_fattr: the fattr device failed its self-test')

"""parity_afoo: the README's torch_foo: the entry point sets ``torch.afoo``
(an attribute device, no PrivateUse1)."""

import types

import parity_fixture as _fixture

_fixture.record('afoo', 'import')


def _autoload():
    import torch
    _fixture.record('afoo', 'entry_point')
    mod = types.ModuleType('parity_afoo.device')
    mod.is_available = lambda: True
    torch.afoo = mod

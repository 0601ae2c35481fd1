"""torch_hook: a backend that registers no device, like PyTorch's own
autoload test package: running it sets ``IS_CUSTOM_DEVICE_BACKEND_IMPORTED``."""

import os

import epload_torch_fixture as _fixture

_fixture.record('hook', 'import')


def _autoload():
    _fixture.record('hook', 'entry_point')
    os.environ['IS_CUSTOM_DEVICE_BACKEND_IMPORTED'] = '1'

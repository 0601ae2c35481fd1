"""parity_phook: a backend with no device, like PyTorch's own autoload test
package: its entry point sets ``IS_CUSTOM_DEVICE_BACKEND_IMPORTED=1``."""

import os

import parity_fixture as _fixture

_fixture.record('phook', 'import')


def _autoload():
    _fixture.record('phook', 'entry_point')
    os.environ['IS_CUSTOM_DEVICE_BACKEND_IMPORTED'] = '1'

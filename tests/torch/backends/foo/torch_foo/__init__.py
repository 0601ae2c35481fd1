"""torch_foo: the PrivateUse1 device ``foo`` in pure Python (a test backend).

Importing it registers the device, as real backends do (a user may import it
explicitly); the ``torch.backends`` entry point ``_autoload`` has nothing
left to do.  ``EPLOAD_TEST_FOO_FAIL=1`` makes the import fail (a device
whose driver went away since its backend was learned)."""

import os

import epload_torch_fixture as _fixture

DEVICE = 'foo'
_fixture.record(DEVICE, 'import')
if os.environ.get('EPLOAD_TEST_FOO_FAIL') == '1':
    raise RuntimeError('torch_foo cannot start: EPLOAD_TEST_FOO_FAIL=1')

runtime = _fixture.setup_privateuse1(DEVICE, __name__)

# A log component of its own: TORCH_LOGS=foo_backend must keep working.
import torch._logging._internal  # noqa: E402

torch._logging._internal.register_log('foo_backend', __name__)


def _autoload():
    _fixture.record(DEVICE, 'entry_point')

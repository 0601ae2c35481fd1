"""torch_forkwaitpu: the PrivateUse1 device ``fwpu``, whose import (with
EPLOAD_TEST_FORK_WAIT=1) says it started and waits to be released before it
registers the device: a test forks while it waits."""

import os

import epload_gate
import epload_torch_fixture as _fixture

_fixture.record('fwpu', 'import')
if os.environ.get('EPLOAD_TEST_FORK_WAIT') == '1':
    epload_gate.started.set()
    epload_gate.release.wait()
runtime = _fixture.setup_privateuse1('fwpu', __name__)


def _autoload():
    _fixture.record('fwpu', 'entry_point')

"""torch_flaky: the PrivateUse1 device ``flaky`` (a test backend, declared
by its distribution) whose import does what ``EPLOAD_TEST_FLAKY`` says, one
action per import in the process (comma-separated; past the list, ``ok``):

* ``ok``: registers the device with its kernels, as torch_foo does;
* ``keyboard``, ``exit:<code>``: raises KeyboardInterrupt / SystemExit
  (kept in ``epload_torch_fixture.RAISED``) before registering anything;
* ``sigint``: sends its process SIGINT (Python raises KeyboardInterrupt);
* ``sleep``: creates ``$EPLOAD_TEST_FLAKY_DIR/sleeping`` and sleeps until a
  signal ends it;
* ``halfway``: registers the device (``torch.flaky``, ``torch.flaky`` in
  ``sys.modules``, PrivateUse1), then fails as a backend whose driver library
  is missing;
* ``attr``: sets ``torch.flaky`` alone, then fails the same way.
"""

import os
import signal
import time

import epload_torch_fixture as _fixture

DEVICE = 'flaky'
_fixture.record(DEVICE, 'import')
_n = sum(n for (who, event), n in _fixture.COUNTS.items() if (who, event) == (DEVICE, 'import'))
_actions = os.environ.get('EPLOAD_TEST_FLAKY', 'ok').split(',')
_action = _actions[_n - 1] if _n <= len(_actions) else 'ok'
_MISSING_DRIVER = 'libflaky_driver.so: cannot open shared object file: No such file or directory'

if _action == 'keyboard':
    _fixture.RAISED = KeyboardInterrupt('flaky: interrupted')
    raise _fixture.RAISED
if _action.startswith('exit:'):
    _code = _action[len('exit:'):]
    _fixture.RAISED = SystemExit(int(_code) if _code.lstrip('-').isdigit() else _code)
    raise _fixture.RAISED
if _action == 'sigint':
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(600)  # not reached: the handler raises at the next bytecode
if _action == 'sleep':
    open(os.path.join(os.environ['EPLOAD_TEST_FLAKY_DIR'], 'sleeping'), 'w').close()
    time.sleep(600)
if _action == 'attr':
    import torch
    torch.flaky = _fixture.device_module(DEVICE, __name__)
    raise RuntimeError(_MISSING_DRIVER)

runtime = _fixture.setup_privateuse1(DEVICE, __name__)
if _action == 'halfway':
    raise RuntimeError(_MISSING_DRIVER)


def _autoload():
    _fixture.record(DEVICE, 'entry_point')

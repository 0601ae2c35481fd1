"""What the parity backends share (not a distribution: the harness puts this
directory on the path beside the backends, with tests/torch/backends/common).

``record`` and ``privateuse1`` are tests/torch/backends/common's
(``epload_torch_fixture``): events appended to ``$EPLOAD_TORCH_FIXTURE_LOG``
and a working PrivateUse1 device in pure Python.

``hold_if_in_a_thread(device)``: with ``$PARITY_HOLD`` naming a directory, a
load running in a thread other than the main one writes ``<dir>/holding``
and waits until ``<dir>/release`` exists (the harness forks, or exits,
while the load is under way there).  A load in the main thread (stock
autoload's, inside ``import torch``) never waits."""

import os
import threading
import time

from epload_torch_fixture import record, setup_privateuse1 as privateuse1  # noqa: F401

# Only against a lost harness: a hold is released by a file, never by time.
_HOLD_LIMIT = 600


def hold_if_in_a_thread(device):
    where = os.environ.get('PARITY_HOLD')
    if not where or threading.current_thread() is threading.main_thread():
        return
    open(os.path.join(where, 'holding'), 'w').close()
    deadline = time.monotonic() + _HOLD_LIMIT
    while not os.path.exists(os.path.join(where, 'release')) and time.monotonic() < deadline:
        time.sleep(0.005)

"""Gates the fixture backends `cycle` and `forkwait` hold their inits at,
so that a test can set up a process shape around a load under way: the two
inits of a cycle meet at ``barrier`` before each looks up the other's
device (``seen``); the `forkwait` init sets ``started`` and waits for
``release``."""

import threading

barrier = threading.Barrier(2)
seen = {}
started = threading.Event()
release = threading.Event()

"""parity_kbint: its import raises KeyboardInterrupt (a user's Ctrl-C
arriving during the load); it would add ``torch.kbint``."""

import parity_fixture as _fixture

_fixture.record('kbint', 'import')
raise KeyboardInterrupt

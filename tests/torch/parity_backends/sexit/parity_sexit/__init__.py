"""parity_sexit: its import raises ``SystemExit(3)``; it would add
``torch.sexit``."""

import parity_fixture as _fixture

_fixture.record('sexit', 'import')
raise SystemExit(3)

"""parity_fimp: would register the PrivateUse1 device ``fimp``; its import
fails first (a driver that is not installed)."""

import parity_fixture as _fixture

_fixture.record('fimp', 'import')
raise ImportError('parity_fimp: the fimp driver is not installed')

"""parity_pone: the PrivateUse1 device ``pone``, registered at import with
the kernels that round-trip values through ``.to("pone")`` and ``.cpu()``."""

import parity_fixture as _fixture

_fixture.record('pone', 'import')
_fixture.hold_if_in_a_thread('pone')
runtime = _fixture.privateuse1('pone', __name__)


def _autoload():
    _fixture.record('pone', 'entry_point')

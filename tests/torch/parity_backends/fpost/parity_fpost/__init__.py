"""parity_fpost: registers the PrivateUse1 device ``fpost`` (name, module
``torch.fpost``, kernels), then fails."""

import parity_fixture as _fixture

_fixture.record('fpost', 'import')
runtime = _fixture.privateuse1('fpost', __name__)
raise RuntimeError('parity_fpost: the fpost device failed its self-test')

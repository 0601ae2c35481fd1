"""torch_broken: fails on import (its distribution declares device
``broken`` under ``[epload.devices]``)."""

import epload_torch_fixture as _fixture

_fixture.record('broken', 'import')
raise ImportError('torch_broken: the device driver is missing')

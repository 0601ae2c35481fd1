"""PyTorch's device-backend autoload, with epload's discovery.

``import_device_backends()`` and ``is_device_backend_autoload_enabled()`` are
``torch._import_device_backends`` and ``torch._is_device_backend_autoload_enabled``
(PyTorch 2.5+) line for line, except that the entry points come from
``epload.entry_points`` instead of ``importlib.metadata.entry_points``: same
group, same switch, same order, the same error text and ``__cause__``, and the
loop stops at the first failure.  A framework swaps its loop for these two
calls without changing behaviour:

    if epload.torch.is_device_backend_autoload_enabled():
        epload.torch.import_device_backends()
"""

import os

from . import _trace
from ._entry_points import entry_points

GROUP = "torch.backends"


def is_device_backend_autoload_enabled():
    """Whether autoloading out-of-the-tree device extensions is enabled:
    ``TORCH_DEVICE_BACKEND_AUTOLOAD`` unset or exactly ``"1"``."""
    # enabled by default
    return os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1"


def import_device_backends():
    """Loads and calls every ``torch.backends`` entry point in discovery
    order; the first failure raises RuntimeError chained from its cause."""
    backend_extensions = entry_points(group=GROUP)

    for backend_extension in backend_extensions:
        try:
            if _trace.ON:  # EPLOAD_TRACE: the same two steps, timed
                _trace.load_backend(backend_extension.name, backend_extension)
                continue
            # Load the extension
            entrypoint = backend_extension.load()
            # Call the entrypoint
            entrypoint()
        except Exception as err:
            raise RuntimeError(
                f"Failed to load the backend extension: {backend_extension.name}. "
                f"You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0."
            ) from err

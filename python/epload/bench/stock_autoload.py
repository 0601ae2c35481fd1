"""Stock PyTorch's backend autoload, as module source for the PyTorch-like
hosts that stand in for torch: epload.bench.suite_startup (the start-up
harness) and tests/py/pyfixtures.py (the Python-front tests).

It behaves as `import torch` (2.5+) does at its end: unless
TORCH_DEVICE_BACKEND_AUTOLOAD is set to something other than "1", every entry
point of group torch.backends is loaded and called, in discovery order
(importlib.metadata); the first failure stops the loop with PyTorch's
RuntimeError text, the failure chained as its cause.  The host module must
import os; it calls the loop as CALL does.
"""

FUNCTIONS = '''
def _autoload_enabled():
    """PyTorch's switch: on unless set to something other than "1"."""
    return os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1"


def _autoload_backends():
    """Loads and calls every torch.backends entry point, in order."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="torch.backends"):
        try:
            ep.load()()
        except Exception as err:
            raise RuntimeError(
                f"Failed to load the backend extension: {ep.name}. "
                "You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0."
            ) from err
'''

# The call that ends the host's __init__.
CALL = '''
if _autoload_enabled():
    _autoload_backends()
'''

"""The closed list of what may differ between stock autoload and the hook,
each with its reason, and the behaviour required where stock cannot be the
oracle.  compare.py excuses a difference only by naming one of these keys
(``excuse()`` refuses any other): a difference no entry covers fails."""

ALLOWED = {
    'when': (
        'When a backend is imported: the hook imports it at its first use (or at import torch, on a '
        'first run that has to learn its devices), stock at import torch.  Never later than the first '
        'use of one of its devices, never more often, and a hook backend (no device) still runs at '
        'import torch.  Only what that timing shows may differ: its load events, and torch.<device> '
        'not being there yet while it is not imported.'),
    'import-survives': (
        'A failing backend does not break import torch: stock raises from import torch (or the process '
        'ends there, for KeyboardInterrupt, SystemExit or a signal); the hook imports torch and the first '
        'use of the backend raises what stock raised (an instance of its class) or ends the process with '
        "stock's status.  Everything else is compared with stock run without that backend installed."),
    'names-backend': (
        "epload's error names the backend: where stock raises, the hook may raise epload's error instead, "
        "an instance of every built-in class stock's error is (hasattr and getattr(..., None) still "
        'answer the same), whose message names the backend where stock\'s does not.'),
    'privateuse1-stays': (
        'A PrivateUse1 name that a failed backend registered before failing, or that epload registered '
        'ahead on its declaration (`[privateuse1]`: the backend\'s word that it registers it), stays '
        'registered: PyTorch cannot undo it.  So the PrivateUse1 name, the current accelerator and torch.device(<that name>) '
        'answer as for a registered name, where stock (without that backend) knows none, and '
        'torch.accelerator.is_available() / device_count() raise torch\'s own error for a registered name '
        'whose module is missing (torch.get_device_module).  Nothing else '
        'of the half-registered backend may be seen.'),
}

# Where stock cannot run or hangs, what the hook must do instead.
REQUIRED = {
    'fork-during-load': (
        'A fork while a load is under way in another thread (stock has no load then: it loaded at import '
        'torch): the child uses the device and gets what stock gives, or an error naming the backend; it '
        'never hangs.'),
    'exit-during-load': (
        'A process that exits while a daemon thread is inside a load (stock has no load then: it loaded at '
        'import torch): its exit status and output are stock\'s, the load\'s later events never happen, and '
        'a later run uses the backend as stock does (it is not refused as crashed).'),
    'subinterpreter': (
        'torch cannot be imported in a subinterpreter: there, with the hook on, '
        'entry_points(group="torch.backends") is importlib\'s answer, directly (epload.entry_points) and '
        'through importlib.metadata with EPLOAD_IMPORTLIB=1, and nothing hangs.'),
}


def excuse(key, excused, what):
    """Records that difference ``what`` is the listed one ``key``."""
    if key not in ALLOWED and key not in REQUIRED:
        raise KeyError(f'{key!r} is not on the list of allowed differences (tests/torch/parity/allowed.py)')
    excused.append(f'[{key}] {what}')

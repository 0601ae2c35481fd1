"""epload's on/off switches, by the one truth table every front uses
(epload/switches.hpp's ``read_flag``, which the command and the core read):
case-insensitive, ``1``, ``true``, ``yes``, ``on`` are on; ``0``, ``false``,
``no``, ``off`` and the empty string are off; unset is the switch's
default; any other value is a RuntimeWarning at the user's line, once, and
the default applies.

Pure Python and import-free: the ``.pth`` hook reads ``EPLOAD_IMPORTLIB``
through it at interpreter start, before epload's native module is loaded.
"""

import os

ON = ('1', 'true', 'yes', 'on')
OFF = ('', '0', 'false', 'no', 'off')

_warned = set()


def flag(variable, default=False):
    """``$variable`` by the table above; ``default`` when unset or bad."""
    value = os.environ.get(variable)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ON:
        return True
    if lowered in OFF:
        return False
    warn_once(f"{variable}='{value}' is not one of {', '.join(ON + OFF[1:])}: "
              f"using {'1' if default else '0'}")
    return default


def warn_once(text):
    """``text`` as a RuntimeWarning at the user's line, once per process."""
    if text in _warned:
        return
    _warned.add(text)
    from ._autoload import warn_user
    warn_user(text)

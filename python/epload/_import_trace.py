"""Every module import of a traced process, as ``import`` spans (EPLOAD_TRACE).

The import system loads each module that is not in ``sys.modules`` yet
through ``importlib._bootstrap._find_and_load``, whether asked by an
``import`` statement, ``__import__`` or ``importlib.import_module``; the
interpreter looks that function up on the module at each import, and it is
what ``python -X importtime`` times (which misses ``import_module``'s).  ``install()`` (run by the .pth hook
when EPLOAD_TRACE is set) wraps it: each call is timed with
``time.monotonic_ns()`` -- CLOCK_MONOTONIC, the native recorder's clock -- and
appended to a list; at exit the list goes to the native recorder, which
writes it into this process's trace with the other spans.  Nested imports
give nested spans, so a module's self time is its span minus the imports
inside it, as ``-X importtime`` counts it.

Nothing is printed and nothing is added to the environment: a traced
command behaves as it does untraced.  The cost is two clock reads and an
append per module imported (about a microsecond); the native module is
loaded only at exit, after the program's own work.  Imports made before the
.pth files run (the interpreter's own start-up: encodings, site, os) are not
seen; neither are imports of a process that ends with ``os._exit``.
"""

import os
import sys
from _thread import get_ident
from time import monotonic_ns as _now

_spans = []          # (module, start_ns, end_ns, thread ident)
_original = None     # importlib._bootstrap._find_and_load before install()
_main_thread = None


def _forget():
    """In a fork()ed child: the spans so far are the parent's."""
    del _spans[:]


def install():
    """Wraps the import system's ``_find_and_load`` (idempotent); the spans
    are handed over at exit."""
    global _original, _main_thread
    if _original is not None:
        return
    bootstrap = sys.modules.get('_frozen_importlib')  # importlib._bootstrap
    original = getattr(bootstrap, '_find_and_load', None)
    if original is None:
        return
    append = _spans.append
    modules = sys.modules

    def _find_and_load(name, import_):
        # importlib.import_module calls in for modules loaded already (or
        # being loaded, in a circular import): no import happens, no span.
        if name in modules:
            return original(name, import_)
        start = _now()
        try:
            return original(name, import_)
        finally:
            append((name, start, _now(), get_ident()))

    _original = original
    _main_thread = get_ident()
    bootstrap._find_and_load = _find_and_load
    os.register_at_fork(after_in_child=_forget)
    import atexit
    atexit.register(flush)


def flush():
    """Hands the spans recorded so far to the native recorder (which writes
    the trace when the process exits).  Spans of other threads keep their
    thread.  Never raises: the command's exit must not change."""
    if not _spans:
        return
    spans = _spans[:]
    del _spans[:]
    try:
        from . import _entry_points
        record = _entry_points._native_module().trace_record
        here = get_ident()
        for name, start, end, thread in spans:
            record('import', name, start, end - start, None if thread == here else thread)
    except Exception as err:  # noqa: BLE001 -- report, never fail the exit
        print(f'epload: EPLOAD_TRACE: the imports could not be recorded: {err}', file=sys.stderr)

"""Profiler spans for Python backends (EPLOAD_TRACE; see docs/cli.md "Profiling start-up").

When ``EPLOAD_TRACE`` is set, each backend load is recorded as a ``load``
span named after the backend, with its ``py_import`` (``ep.load()``) and
``py_call`` (calling what it returned) nested inside.  The spans are timed
here with ``time.monotonic_ns()`` -- CLOCK_MONOTONIC, the clock the native
recorder uses -- and handed to ``_native.trace_record``, which writes them
with the native spans when the process exits.  Unset, the only cost is the
``ON`` check.
"""

import os
from time import monotonic_ns as now

ON = bool(os.environ.get('EPLOAD_TRACE'))


def record(phase, name, start_ns, end_ns):
    """Hands one span to the native recorder."""
    from . import _entry_points  # loads the native module the way every query does
    _entry_points._native_module().trace_record(phase, name, start_ns, end_ns - start_ns)


def run_body(loader, module):
    """``loader.exec_module(module)``: a host's own body, which the .pth hook
    runs before the autoload, recorded as a ``total`` span "body of <host>"
    inside the hook's "import <host>" span, so that a profile tells the
    host's own import from what epload added to it."""
    if not ON:
        loader.exec_module(module)
        return
    t0 = now()
    try:
        loader.exec_module(module)
    finally:
        record('total', f'body of {module.__name__}', t0, now())


def import_and_call(name, ep):
    """``ep.load()()``, recorded as py_import and py_call spans of ``name``.
    Exceptions pass through unchanged."""
    t0 = now()
    try:
        fn = ep.load()
    finally:
        t1 = now()
        record('py_import', name, t0, t1)
    try:
        return fn()
    finally:
        record('py_call', name, t1, now())


def load_backend(name, ep):
    """``import_and_call`` inside a ``load`` span of ``name``."""
    t0 = now()
    try:
        return import_and_call(name, ep)
    finally:
        record('load', name, t0, now())

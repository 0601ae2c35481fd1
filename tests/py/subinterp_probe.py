"""Asks for entry points inside a subinterpreter of the running interpreter
and prints, as JSON, what each subinterpreter answered and what the main
interpreter answers.  Shared by tests/py/test_process_shapes.py (the build's
module) and tests/torch/test_parity.py (epload installed in a venv of each
CPython 3.10-3.13).

    python subinterp_probe.py OUT_DIR GROUP

For each way of asking (``epload.entry_points`` directly, or
``importlib.metadata.entry_points`` under EPLOAD_IMPORTLIB=1 when it is set),
each order (epload's native module imported by the main interpreter first,
or not) and each configuration the version offers (3.10, 3.11: legacy
subinterpreters, ``_testcapi.run_in_subinterp``; 3.12: legacy and isolated,
``_xxsubinterpreters``; 3.13: ``_interpreters``), one fresh subinterpreter.
A hang is the caller's subprocess timeout."""

import json
import os
import sys

out_dir, group = sys.argv[1], sys.argv[2]
order = sys.argv[3]  # "main-first" or "sub-first"

SUB = r'''
import json, sys
import importlib.metadata as md
try:
    if {direct!r}:
        import epload
        eps = epload.entry_points(group={group!r})
    else:
        eps = md.entry_points(group={group!r})
    answer, error = sorted([ep.name, ep.value, ep.group] for ep in eps), None
except BaseException as e:
    answer, error = None, [type(e).__name__, str(e)]
with open({out!r}, "w") as f:
    json.dump({{"answer": answer, "error": error, "native": "epload._native" in sys.modules,
               "function": md.entry_points.__module__}}, f)
'''


def configs():
    """(name, run(code)) for each kind of subinterpreter of this version."""
    v = sys.version_info[:2]
    if v >= (3, 13):
        import _interpreters as interpreters

        def run_with(cfg):
            def run(code):
                i = interpreters.create(cfg)
                try:
                    interpreters.run_string(i, code)
                finally:
                    interpreters.destroy(i)
            return run
        return [('legacy', run_with('legacy')), ('isolated', run_with('isolated'))]
    if v == (3, 12):
        import _xxsubinterpreters as interpreters

        def run_with(isolated):
            def run(code):
                i = interpreters.create(isolated=isolated)
                try:
                    interpreters.run_string(i, code)
                finally:
                    interpreters.destroy(i)
            return run
        return [('legacy', run_with(False)), ('isolated', run_with(True))]
    import _testcapi
    return [('legacy', _testcapi.run_in_subinterp)]


if order == 'main-first':
    import epload
    epload.entry_points(group=group)
    assert 'epload._native' in sys.modules
ways = [('direct', True)]
if os.environ.get('EPLOAD_IMPORTLIB') == '1':
    ways.append(('importlib', False))
report = {'version': list(sys.version_info[:2]), 'runs': {}}
for config, run in configs():
    for way, direct in ways:
        out = os.path.join(out_dir, f'{order}-{config}-{way}.json')
        run(SUB.format(direct=direct, group=group, out=out))
        with open(out) as f:
            report['runs'][f'{config}-{way}'] = json.load(f)
import importlib.metadata as md  # noqa: E402
report['main'] = sorted([ep.name, ep.value, ep.group] for ep in md.entry_points(group=group))
report['function'] = md.entry_points.__module__
print(json.dumps(report))

"""Fixtures for the Python-front tests: distribution trees, a PyTorch-like host
package, backends with every failure mode, and a runner for fresh interpreters.

Everything is real: directories under a pytest tmp_path, /usr/bin/python3 (or
$EPLOAD_PYTHON) in a subprocess, importlib.metadata as the oracle.
"""

import json
import os
import subprocess
import sys
import textwrap

PYTHON = os.environ.get('EPLOAD_PYTHON', '/usr/bin/python3')
SOURCE_DIR = os.environ.get(
    'EPLOAD_SOURCE_DIR', os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get('EPLOAD_BUILD_DIR', os.path.join(SOURCE_DIR, 'build'))
PACKAGE_DIR = os.path.join(BUILD_DIR, 'python')  # holds epload/

sys.path.insert(0, os.path.join(SOURCE_DIR, 'scripts'))
import _bench  # noqa: E402  (the harness package, python/epload/bench/)

_bench.package()
from epload_bench import stock_autoload  # noqa: E402


# ---- distribution trees -------------------------------------------------------

def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = 'wb' if isinstance(data, bytes) else 'w'
    with open(path, mode) as f:
        f.write(data)
    return path


def entry_points_text(groups):
    """{group: ["name = value", ...]} -> entry_points.txt text."""
    out = []
    for group, lines in groups.items():
        out.append(f'[{group}]')
        out.extend(lines)
        out.append('')
    return '\n'.join(out)


def make_dist(site, name, version='1.0', entry_points=None, *, kind='dist-info',
              dirname=None, metadata=None):
    """Creates <site>/<name>-<version>.<kind>/ with METADATA (PKG-INFO for
    egg-info) and entry_points.txt.  ``entry_points``: dict of group -> lines,
    or raw str/bytes written as is.  ``metadata``: raw METADATA text (default:
    Name and Version headers).  Returns the metadata directory."""
    d = os.path.join(site, dirname or f'{name}-{version}.{kind}')
    os.makedirs(d, exist_ok=True)
    if metadata is None:
        metadata = f'Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n'
    write(os.path.join(d, 'PKG-INFO' if kind == 'egg-info' else 'METADATA'), metadata)
    if entry_points is not None:
        text = entry_points if isinstance(entry_points, (str, bytes)) else entry_points_text(entry_points)
        write(os.path.join(d, 'entry_points.txt'), text)
    return d


def random_sites(rng, root, add_dist):
    """1 to 3 site directories root/site0, site1, ... with 1 to 8
    distributions each, named dist0..dist11 (so names repeat on later
    sites); ``add_dist(site, k, name)`` makes the k-th of a site.  Returns
    the sites in order."""
    sites = []
    for s in range(rng.randrange(1, 4)):
        site = root / f"site{s}"
        site.mkdir()
        sites.append(site)
        for k in range(rng.randrange(1, 9)):
            add_dist(site, k, f"dist{rng.randrange(12)}")
    return sites


# ---- subprocesses ---------------------------------------------------------------

def env_for(tmp_path, *, pythonpath=(), extra=None, drop=()):
    """Environment for a fresh interpreter: epload importable, a private
    cache directory, no user site, nothing inherited that changes autoload."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EPLOAD_', 'TORCH_DEVICE_BACKEND_AUTOLOAD', 'PYTHON'))}
    env['PYTHONPATH'] = os.pathsep.join([*map(str, pythonpath), PACKAGE_DIR])
    env['EPLOAD_CACHE_DIR'] = str(tmp_path / 'cache')
    env['PYTHONNOUSERSITE'] = '1'
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    for k in drop:
        env.pop(k, None)
    env.update(extra or {})
    return env


def run_py(tmp_path, code, *, pythonpath=(), env=None, cwd=None, args=(), check=True):
    """Runs ``code`` in a fresh interpreter; returns CompletedProcess."""
    proc = subprocess.run([PYTHON, *args, '-c', textwrap.dedent(code)],
                          env=env_for(tmp_path, pythonpath=pythonpath, extra=env),
                          cwd=str(cwd or tmp_path), capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f'interpreter failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}')
    return proc


def run_json(tmp_path, code, **kw):
    """Runs ``code``, which must print one JSON document as its last line."""
    proc = run_py(tmp_path, code, **kw)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- a PyTorch-like host and its backends ---------------------------------------

HOST = 'fakehost'

HOST_STYLES = {
    # Stock PyTorch's loop (epload.bench.stock_autoload): the oracle.
    'pytorch': stock_autoload.FUNCTIONS + stock_autoload.CALL,
    # PyTorch with its two functions swapped for epload's.
    'epload-torch': '''
import epload.torch
if epload.torch.is_device_backend_autoload_enabled():
    epload.torch.import_device_backends()
''',
    'epload-eager': '''
import epload
epload.autoload(group="torch.backends", host=__name__, mode="eager")
''',
    'epload-lazy': '''
import epload
epload.autoload(group="torch.backends", host=__name__, mode="lazy")
''',
    # No autoload of its own (for the zero-code hook).
    'plain': '',
}


def make_host(root, style, name=HOST):
    """A host package whose import ends with the autoload of ``style``.  The
    event list lives in module ``<name>_events`` so that it survives a failed
    import of the host."""
    write(os.path.join(root, f'{name}_events.py'), 'events = []\n')
    return write(os.path.join(root, name, '__init__.py'), f'''\
import os
import sys

from {name}_events import events as _events  # what the backends did, in order
_init_counts = {{}}     # backend -> number of inits


def _register_device_module(device_type, module):
    """As torch._register_device_module: torch.<device_type> = module."""
    setattr(sys.modules[__name__], device_type, module)

{HOST_STYLES[style]}
''')


# How a backend behaves; each is its package's __init__.py.
BACKEND_KINDS = {
    # Registers its devices when called (torch_npu's pattern).
    'normal': '''
import sys, threading, time, types
_host = None

def _autoload():
    import {host} as host
    host._events.append(("call", "{name}"))
    host._init_counts["{name}"] = host._init_counts.get("{name}", 0) + 1
    time.sleep({delay})  # widens any race between concurrent lookups
    for device in {devices!r}:
        host._register_device_module(device, types.ModuleType("{module}." + device))

import {host} as _h
_h._events.append(("import", "{name}"))
''',
    # Its work happens at import; the entry point is a do-nothing callable.
    'import-work': '''
import sys, types
import {host} as _h
_h._events.append(("import", "{name}"))
for device in {devices!r}:
    _h._register_device_module(device, types.ModuleType("{module}." + device))

def _autoload():
    _h._events.append(("call", "{name}"))
''',
    # Imports the host first, then defines its callable (circular import).
    'circular': '''
import types
import {host}
{host}._events.append(("import", "{name}"))

def _autoload():
    {host}._events.append(("call", "{name}"))
    for device in {devices!r}:
        {host}._register_device_module(device, types.ModuleType("{module}." + device))
''',
    # Defines its callable first, then imports the host (habana's pattern):
    # importable explicitly before the host.
    'callable-first': '''
import types

def _autoload():
    import {host}
    {host}._events.append(("call", "{name}"))
    for device in {devices!r}:
        {host}._register_device_module(device, types.ModuleType("{module}." + device))

import {host}
{host}._events.append(("import", "{name}"))
''',
    'import-error': '''
import {host}
{host}._events.append(("import", "{name}"))
raise ImportError("{name} cannot find its native library")
''',
    'missing-attr': '''
import {host}
{host}._events.append(("import", "{name}"))
''',
    'not-callable': '''
import {host}
{host}._events.append(("import", "{name}"))
_autoload = 42
''',
    'raises': '''
import {host}
{host}._events.append(("import", "{name}"))

def _autoload():
    {host}._events.append(("call", "{name}"))
    raise ValueError("{name}: no device found")
''',
}


def make_backend(site, name, kind='normal', *, devices=None, host=HOST, version='1.0',
                 module=None, group='torch.backends', declare=False, delay=0.0, dist=None):
    """A distribution ``name`` with package ``module`` (default: name) and the
    entry point ``name = module:_autoload`` in ``group``.  ``devices``
    defaults to (name + "dev",).  ``declare``: also declare the devices in
    group epload.devices."""
    module = module or name
    devices = tuple(devices) if devices is not None else (f'{name}dev',)
    write(os.path.join(site, module, '__init__.py'),
          BACKEND_KINDS[kind].format(host=host, name=name, module=module, devices=devices,
                                     delay=delay))
    groups = {group: [f'{name} = {module}:_autoload']}
    if declare:
        groups['epload.devices'] = [f'{d} = {name}' for d in devices]
    make_dist(site, dist or name, version, groups)
    return devices


# A script printing, as JSON, what `import fakehost` did: the exception (type,
# text, cause), the backend events, the backend modules imported.
OUTCOME = '''
import json, sys, traceback
before = set(sys.modules)
result = {"error": None, "cause": None}
try:
    import fakehost
except BaseException as e:
    result["error"] = [type(e).__name__, str(e)]
    c = e.__cause__
    result["cause"] = None if c is None else [type(c).__name__, str(c)]
    fakehost = sys.modules.get("fakehost")
host = sys.modules.get("fakehost")
events = sys.modules.get("fakehost_events")
result["events"] = [list(e) for e in events.events] if events else None
result["imported"] = sorted(m for m in set(sys.modules) - before
                            if m.startswith("be_"))
print(json.dumps(result))
'''

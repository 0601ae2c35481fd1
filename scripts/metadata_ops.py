#!/usr/bin/python3
"""Metadata operations one Python process start makes to look up one
entry-point group, counted with `strace -f -c`: what a shared file system's
metadata server sees per process, times the number of processes.

    scripts/metadata_ops.py [--dists 6000] [--python PY] [--build DIR]
                            [--md-out F] [--json-out F] [--keep]

One environment of --dists distributions is generated with
scripts/gen_env.py (10 Python backends under torch.backends among ordinary
distributions).  Each variant is a fresh `PY -c` process, with PYTHONPATH
holding the built package (<build>/python) and the environment, that looks
group torch.backends up once:

  importlib         importlib.metadata.entry_points(group=...)
  epload full       epload.entry_points(group=...), warm cache, EPLOAD_VALIDATE=full
  epload paths      the same with EPLOAD_VALIDATE=paths
  shipped index     the same with EPLOAD_INDEX=FILE (`epload index build
                    --output FILE`, made when the environment was), an
                    empty cache directory that stays empty

and `baseline` imports the same modules and looks nothing up.  Reported
per variant: the calls of the stat family (stat, lstat, fstat, newfstatat,
statx), openat, getdents64 and read, and their sum, each less the
baseline's; and whether the process wrote a file into its cache directory.
Needs strace.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_common import (  # noqa: E402
    BenchError, SOURCE_DIR, capture, clean_env, ensure_env, harness_main, log, machine,
    strace_counts, write_report)

GROUP = 'torch.backends'
FAMILIES = ('stat', 'openat', 'getdents64', 'read')
IMPORTS = 'import sys, importlib.metadata, epload\n'
LOOKUPS = {
    'baseline': '',
    'importlib': f'importlib.metadata.entry_points(group={GROUP!r})',
    'epload full': f'epload.entry_points(group={GROUP!r})',
    'epload paths': f'epload.entry_points(group={GROUP!r})',
    'shipped index': f'epload.entry_points(group={GROUP!r})',
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--dists', type=int, default=6000, help='distributions (default 6000)')
    p.add_argument('--python', default='/usr/bin/python3', help='the interpreter the build is for')
    p.add_argument('--build', default=os.environ.get('EPLOAD_BUILD_DIR', os.path.join(SOURCE_DIR, 'build')))
    p.add_argument('--env-dir', help='where the generated environment is kept (default: under the build)')
    p.add_argument('--md-out')
    p.add_argument('--json-out')
    p.add_argument('--keep', action='store_true')
    args = p.parse_args(argv)
    if args.dists < 11:
        p.error('--dists must be at least 11 (10 of them are backends)')
    return args


def run(args, tmp):
    if shutil.which('strace') is None:
        raise BenchError('strace is not installed (apt-get install strace)')
    epload_bin = os.path.join(args.build, 'epload')
    package = os.path.join(args.build, 'python')
    if not os.path.isfile(epload_bin) or not os.path.isdir(os.path.join(package, 'epload')):
        raise BenchError(f'no build in {args.build}: run scripts/setup.sh first')
    env_dir = args.env_dir or os.path.join(args.build, 'bench-metadata-ops', f'env-{args.dists}')
    manifest, reused = ensure_env(sys.executable, env_dir, 10, args.dists - 10, GROUP)
    site = manifest['search_path']
    log(f'environment {env_dir} ({"reused" if reused else "generated"}): {args.dists} distributions')
    # Each process runs a script (its directory, not '', is sys.path[0]).
    work = os.path.join(tmp, 'work')
    os.makedirs(work)
    base = dict(clean_env(tmp), PYTHONPATH=os.pathsep.join([package, site]))
    caches = {name: os.path.join(tmp, 'cache-' + name.replace(' ', '-')) for name in LOOKUPS}
    envs = {name: dict(base, EPLOAD_CACHE_DIR=caches[name]) for name in LOOKUPS}
    envs['epload paths']['EPLOAD_VALIDATE'] = 'paths'
    # The shipped index: built once, as when the environment is built, for
    # the search paths the processes have (their sys.path, from the same
    # interpreter, environment and directory).
    # Every script is written before the index is built: a change to a
    # directory on the path (sys.path[0] is theirs) makes the index stale.
    scripts = {}
    for name, lookup in LOOKUPS.items():
        scripts[name] = os.path.join(work, name.replace(' ', '-') + '.py')
        with open(scripts[name], 'w') as f:
            f.write(IMPORTS + (f'import json; print(json.dumps(sorted([e.name, e.value] for e in {lookup})))'
                               if lookup else ''))
    path_script = os.path.join(work, 'path.py')
    with open(path_script, 'w') as f:
        f.write('import json, sys; print(json.dumps(sys.path))\n')
    paths = json.loads(capture([args.python, path_script], base).stdout)
    index = os.path.join(env_dir, 'env.index')
    capture([epload_bin, 'index', 'build', '--output', index, *[a for p in paths for a in ('--path', p)]],
            dict(base, EPLOAD_CACHE_DIR=os.path.join(tmp, 'cache-build')))
    envs['shipped index']['EPLOAD_INDEX'] = index
    check = subprocess.run([args.python, scripts['shipped index']], capture_output=True, text=True,
                           env=dict(envs['shipped index'], EPLOAD_DEBUG='1'))
    if 'index shipped' not in check.stderr:
        raise BenchError(f'the shipped index was not used:\n{check.stderr[-2000:]}')
    result = {'machine': machine(), 'dists': args.dists, 'python': args.python, 'variants': {}}
    answers = {}
    for name in LOOKUPS:
        argv = [args.python, scripts[name]]
        # Warm: the cache written (full, paths), the page cache filled.
        answers[name] = subprocess.run(argv, env=envs[name], capture_output=True, text=True).stdout
        before = set(os.listdir(caches[name])) if os.path.isdir(caches[name]) else set()
        counts = strace_counts(argv, envs[name], tmp)
        after = set(os.listdir(caches[name])) if os.path.isdir(caches[name]) else set()
        result['variants'][name] = {k: counts[k] for k in FAMILIES} | {
            'total': counts['total'], 'wrote_cache_files': sorted(after - before)}
    want = answers['importlib']
    for name in LOOKUPS:
        if name != 'baseline' and answers[name] != want:
            raise BenchError(f'variant {name} answered differently from importlib:\n'
                             f'{answers[name][:500]}\n!=\n{want[:500]}')
    if result['variants']['shipped index']['wrote_cache_files']:
        raise BenchError(f"the shipped index's process wrote cache files: "
                         f"{result['variants']['shipped index']['wrote_cache_files']}")
    floor = result['variants']['baseline']
    for name, v in result['variants'].items():
        v['metadata_ops'] = sum(v[k] - floor[k] for k in FAMILIES)
    write_report(result, markdown(result), md_out=args.md_out, json_out=args.json_out)
    return 0


def markdown(result):
    floor = result['variants']['baseline']
    lines = [f"Metadata operations of one process start's lookup of `{GROUP}`, "
             f"{result['dists']:,} distributions (`strace -f -c`, less a process that "
             "looks nothing up):", '',
             '| variant | stat family | openat | getdents64 | read | total | cache files written |',
             '|---|---:|---:|---:|---:|---:|---|']
    for name, v in result['variants'].items():
        if name == 'baseline':
            continue
        cells = ' | '.join(f'{v[k] - floor[k]:,}' for k in FAMILIES)
        lines.append(f"| {name} | {cells} | {v['metadata_ops']:,} | "
                     f"{', '.join(v['wrote_cache_files']) or 'none'} |")
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(harness_main('metadata_ops.py', parse_args, run))

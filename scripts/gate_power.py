#!/usr/bin/env python3
"""gate_power.py — how often `epload bench`'s gates cry wolf, and how often
they catch what they are for: RUNS rounds, each of three `python -m
epload.bench` runs, interleaved, in a torch venv's environment plus one
backend on PYTHONPATH (a hook: it declares no device, so it runs inside
`import torch` even when lazy):

  unchanged   the hook costs 0 ms           a wall-time failure is a false alarm
  slowed      the hook burns --slow-ms      caught when the wall-time gate fails
  modules     the hook imports five more    caught when the count gate fails
              modules in 0 ms               (against an unchanged run's --json)

Each run: `--synthetic 0 --fail-over PCT` and the bench's default rounds,
plus --bench-args (e.g. "--quick --rounds 2" to try the script at a tiny
size: --quick reports, never judges, so nothing is caught then).  Prints a
Markdown table for BENCHMARKS.md with the command; --json writes every run's
exit status and figures.

    scripts/gate_power.py                       # 20 rounds: the published figures
    scripts/gate_power.py --runs 1 --bench-args="--quick --rounds 2 --runs 2 --warmup 0"
"""

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
NAME = 'gate_power_hook'
HOOK = '''import os, time
{imports}_end = time.process_time() + {ms} / 1000
while time.process_time() < _end:
    pass


def _autoload():
    os.environ["GATE_POWER_HOOK"] = "1"
'''


def write_backend(where, ms=0.0, extra=0):
    """The hook backend in ``where`` (a PYTHONPATH entry): same distribution,
    same entry point, whatever it costs."""
    where.mkdir(parents=True, exist_ok=True)
    for k in range(extra):
        (where / f'{NAME}_extra_{k}.py').write_text('')
    (where / f'{NAME}.py').write_text(HOOK.format(
        ms=ms, imports=''.join(f'import {NAME}_extra_{k}\n' for k in range(extra))))
    info = where / f'{NAME}-1.0.dist-info'
    info.mkdir(exist_ok=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {NAME}\nVersion: 1.0\n')
    (info / 'entry_points.txt').write_text(f'[torch.backends]\n{NAME} = {NAME}:_autoload\n')


def bench(python, backend_dir, argv, out):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_'))}
    env['PYTHONPATH'] = str(backend_dir)
    t0 = time.monotonic()
    proc = subprocess.run([python, '-m', 'epload.bench', *argv, '--json', str(out)], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode not in (0, 1):
        raise SystemExit(f'gate_power: epload bench exited {proc.returncode}:\n'
                         f'{proc.stderr[-2000:]}')
    data = json.loads(out.read_text())
    return {'status': proc.returncode, 'seconds': round(time.monotonic() - t0, 1),
            'targets': [{k: t.get(k) for k in ('rule', 'met', 'measured', 'unjudged')}
                        for t in data['targets']]}


def failed(run, rule):
    return any(t['rule'] == rule and t['met'] is False for t in run['targets'])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                epilog=__doc__.split('\n\n', 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--runs', type=int, default=20, help='rounds of the three runs (20)')
    p.add_argument('--python', help="a torch venv's python with epload installed (default: "
                                    "scripts/torch_env.py's)")
    p.add_argument('--build', default=str(HERE.parent / 'build'), help='the build directory')
    p.add_argument('--fail-over', type=float, default=2.0, help='the wall-time gate, %% (2)')
    p.add_argument('--slow-ms', type=float, default=100.0, help="the slowed hook's cost (100)")
    p.add_argument('--extra-modules', type=int, default=5, help='modules added (5)')
    p.add_argument('--bench-args', default='', help='more arguments of every bench run')
    p.add_argument('--json', help='write every run as JSON')
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error('--runs must be >= 1')
    python = args.python
    if python is None:
        sys.path.insert(0, str(HERE))
        import torch_env
        python = str(torch_env.ensure(pathlib.Path(args.build)))
    common = ['--synthetic', '0', '--fail-over', f'{args.fail_over:g}',
              *shlex.split(args.bench_args)]
    runs = {'unchanged': [], 'slowed': [], 'modules': []}
    with tempfile.TemporaryDirectory(prefix='gate-power-') as tmp:
        tmp = pathlib.Path(tmp)
        dirs = {'unchanged': tmp / 'unchanged', 'slowed': tmp / 'slowed',
                'modules': tmp / 'modules'}
        write_backend(dirs['unchanged'])
        write_backend(dirs['slowed'], ms=args.slow_ms)
        write_backend(dirs['modules'], extra=args.extra_modules)
        baseline = tmp / 'baseline.json'
        print('gate_power: the count baseline (an unchanged run) ...', file=sys.stderr)
        bench(python, dirs['unchanged'], common, baseline)
        for k in range(args.runs):
            for kind in runs:
                print(f'gate_power: round {k + 1}/{args.runs}: {kind} ...', file=sys.stderr)
                more = ['--baseline', str(baseline), '--fail-count-regression']
                runs[kind].append(bench(python, dirs[kind], common + more, tmp / 'run.json'))
    n = args.runs
    alarms = sum(failed(r, 'whole') or failed(r, 'counts') for r in runs['unchanged'])
    slow = sum(failed(r, 'whole') for r in runs['slowed'])
    counted = sum(failed(r, 'counts') for r in runs['modules'])
    judged = sum(any(t['rule'] == 'whole' and t['met'] is not None for t in r['targets'])
                 for r in runs['slowed'])
    command = ' '.join(['scripts/gate_power.py', *(argv if argv is not None else sys.argv[1:])])
    print(f'| what | runs | result |\n|---|---:|---|\n'
          f'| false alarms, unchanged environment (either gate) | {n} | {alarms} of {n} |\n'
          f'| hook backend +{args.slow_ms:g} ms caught by `--fail-over {args.fail_over:g}` | {n} '
          f'| {slow} of {n} ({judged} judged) |\n'
          f'| hook backend +{args.extra_modules} modules in 0 ms caught by '
          f'`--fail-count-regression` | {n} | {counted} of {n} |\n\n'
          f'`{command}` on {os.cpu_count()} CPUs; each run `python -m epload.bench '
          f'{" ".join(common)}`; median run '
          f'{sorted(r["seconds"] for v in runs.values() for r in v)[(3 * n) // 2]:.0f} s.')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'args': vars(args), 'runs': runs}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())

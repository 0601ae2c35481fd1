"""The first dynamo-backend discovery of a real PyTorch process, stock
against EPLOAD_IMPORTLIB=1, timed in-process.

    scripts/bench_dynamo.py [--python PY] [--dists 6000] [--rounds 11]
                            [--md-out F] [--json-out F] [--keep]

The interpreter is the venv of scripts/torch_env.py (torch 2.13.0, epload
and its .pth hook) unless --python names another.  One environment of
--dists distributions is generated with scripts/gen_env.py (one of them a
backend under group torch_dynamo_backends, the rest ordinary ones), and the
fixture distribution of tests/torch/backends/dynamo goes after it.  Each
process runs

    import torch
    torch._dynamo.backends.registry._discover_entrypoint_backends()

and times the second line with perf_counter_ns, and its CPU time with
process_time_ns (every thread of the process: `full`'s stats run on two): the call the first
`torch.compile` or `torch._dynamo.list_backends()` makes (functools.cache'd:
once per process; the harness checks nothing called it before).  Variants,
interleaved round by round in shuffled order (seeded), each a fresh process:

  stock         importlib.metadata's own entry_points (a full scan)
  switch        EPLOAD_IMPORTLIB=1: epload's index, `full` validation
  switch-paths  EPLOAD_IMPORTLIB=1 EPLOAD_VALIDATE=paths

Every variant is checked once before timing: the same backend names, the
generated backend and the fixture among them, answered by importlib resp.
epload (warming epload's index cache).  --warmup rounds run untimed first.
Reported: medians, quartiles, and the ratio stock / variant of the medians
(target: >= 20x for `switch`), of wall and of CPU time (on a shared machine
the wall time holds the run-queue waits too).

The price of the switch in a process that never looks entry points up is
measured too (--pth-rounds fresh `PY -X importtime -c pass`, alternating):
with EPLOAD_IMPORTLIB unset the .pth line imports nothing (checked); with
`1` it imports epload's pure-Python hook and no native module (checked),
and its import time is the cumulative time of `epload._hook` as
-X importtime reports it.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys

from . import options
from .envs import SOURCE_DIR, clean_env, ensure_env, machine, torch_python
from .proc import BenchError, capture, harness_main, log
from .report import table, write_report
from .stats import quartiles

GROUP = "torch_dynamo_backends"
MARK = "EPLOAD-BENCH-DYNAMO "
FIXTURES = [os.path.join(SOURCE_DIR, "tests", "torch", "backends", d) for d in ("common", "dynamo")]
VARIANTS = {
    "stock": {},
    "switch": {"EPLOAD_IMPORTLIB": "1"},
    "switch-paths": {"EPLOAD_IMPORTLIB": "1", "EPLOAD_VALIDATE": "paths"},
}
TARGET = 20.0

CODE = r'''
import sys, time, json
sys.path += {paths!r}
import torch
from torch._dynamo.backends import registry
import importlib.metadata as md
fresh = registry._discover_entrypoint_backends.cache_info().currsize == 0
c0, t0 = time.process_time_ns(), time.perf_counter_ns()
registry._discover_entrypoint_backends()
dt, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
t0 = time.perf_counter_ns()
md.entry_points(group="torch_dynamo_backends")
again = time.perf_counter_ns() - t0
print({mark!r} + json.dumps({{"ns": dt, "cpu_ns": cpu, "again_ns": again, "fresh": fresh,
                              "by": md.entry_points.__module__, "names": sorted(registry._BACKENDS)}}))
'''


def parse_args(argv):
    p = options.parser("bench_dynamo.py", __doc__)
    options.add_common(p, rounds=(11, 3), warmup=(0, 0), python=None, plot=False,
                       python_help="the torch venv's python (default: scripts/torch_env.py's)")
    p.add_argument("--dists", type=int, default=6000, help="distributions generated (6000)")
    p.add_argument("--pth-rounds", type=int, help=".pth cost samples (21; --quick: 5)")
    p.add_argument("--env-dir", metavar="DIR",
                   help="where the generated environment is kept (default: under the build)")
    args = options.finish(p, p.parse_args(argv))
    args.pth_rounds = args.pth_rounds if args.pth_rounds is not None else (5 if args.quick else 21)
    if args.dists < 2 or args.pth_rounds < 1:
        p.error("--dists must be >= 2 and --pth-rounds >= 1")
    return args


def main(argv=None):
    return harness_main("bench_dynamo.py", parse_args, run, argv)


def once(python, code, env):
    """The result line of one process."""
    stdout = capture([python, "-I", "-c", code], env).stdout
    for line in stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise BenchError(f"{python} printed no result:\n{stdout[-2000:]}")


def check(answers):
    """Refuses to time a variant that is not answered by the right module
    or does not find stock's backends."""
    stock = answers["stock"]["names"]
    for name, got in answers.items():
        by = "importlib.metadata" if name == "stock" else "epload._entry_points"
        if not got["fresh"] or got["by"] != by or got["names"] != stock \
                or "epload_fixture" not in got["names"] or len(got["names"]) < 2:
            raise BenchError(f"variant {name} did not do its job: {got} (want answered by {by}, "
                             f"the names of stock: {stock})")


def run(args, tmp):
    python = args.python or torch_python(args.build, "bench_dynamo.py")
    env_dir = args.env_dir or os.path.join(args.build, "bench-dynamo", f"env-{args.dists}")
    manifest, reused = ensure_env(sys.executable, env_dir, 1, args.dists - 1, GROUP)
    log(f"environment {env_dir} ({'reused' if reused else 'generated'}): {args.dists} distributions")
    code = CODE.format(paths=[manifest["search_path"], *FIXTURES], mark=MARK)
    base = clean_env(tmp)
    envs = {name: dict(base, **extra) for name, extra in VARIANTS.items()}
    check({name: once(python, code, env) for name, env in envs.items()})
    samples = {name: [] for name in VARIANTS}
    again = {name: [] for name in VARIANTS}
    cpu = {name: [] for name in VARIANTS}
    order, rng = list(VARIANTS), random.Random(0)
    for r in range(args.warmup + args.rounds):
        rng.shuffle(order)
        for name in order:
            got = once(python, code, envs[name])
            if r >= args.warmup:
                samples[name].append(got["ns"] / 1e6)
                again[name].append(got["again_ns"] / 1e6)
                cpu[name].append(got["cpu_ns"] / 1e6)
        if r >= args.warmup:
            log(f"round {r + 1 - args.warmup}/{args.rounds}: "
                + ", ".join(f"{n} {samples[n][-1]:.2f} ms" for n in VARIANTS))
    result = {"machine": machine(), "python": python, "dists": args.dists, "rounds": args.rounds,
              "warmup": args.warmup, "load_average": os.getloadavg(), "variants": {}}
    stock = statistics.median(samples["stock"])
    stock_cpu = statistics.median(cpu["stock"])
    for name, ms in samples.items():
        q1, med, q3 = quartiles(ms)
        cpu_med = statistics.median(cpu[name])
        result["variants"][name] = {"median_ms": med, "q1_ms": q1, "q3_ms": q3, "samples_ms": ms,
                                    "ratio": stock / med, "again_ms": statistics.median(again[name]),
                                    "cpu_median_ms": cpu_med, "cpu_samples_ms": cpu[name],
                                    "cpu_ratio": stock_cpu / cpu_med}
    result["pth"] = pth_cost(python, base, args.pth_rounds)
    write_report(result, markdown(result), md_out=args.md_out, json_out=args.json_out)
    return 0


PTH_PROBE = 'import sys; print("PTH", "epload" in sys.modules, "epload._native" in sys.modules)'


def pth_cost(python, base, rounds):
    """The .pth hook's import time (ms, medians) with the switch off and on,
    in processes that look nothing up."""
    out = {"off": [], "on": []}
    for _ in range(rounds):
        for name, extra in (("off", {}), ("on", {"EPLOAD_IMPORTLIB": "1"})):
            proc = capture([python, "-X", "importtime", "-c", PTH_PROBE], dict(base, **extra))
            if proc.stdout.split() != ["PTH", str(name == "on"), "False"]:
                raise BenchError(f".pth probe ({name}) printed {proc.stdout!r}, want epload "
                                 "imported only with the switch and never its native module:\n"
                                 f"{proc.stderr[-2000:]}")
            us = 0
            for line in proc.stderr.splitlines():
                parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
                if len(parts) == 3 and parts[2] == "epload._hook":
                    us = int(parts[1])
            out[name].append(us / 1000)
    return {name: statistics.median(v) for name, v in out.items()}


def markdown(result):
    rows = [[name, f"{v['median_ms']:.2f} ms", f"{v['q1_ms']:.2f}–{v['q3_ms']:.2f} ms",
             f"{v['ratio']:.1f}×", f"{v['cpu_median_ms']:.2f} ms", f"{v['cpu_ratio']:.1f}×",
             f"{v['again_ms']:.2f} ms"]
            for name, v in result["variants"].items()]
    lines = [f"First dynamo-backend discovery after `import torch` (torch 2.13.0), "
             f"{result['dists']:,} distributions, {result['rounds']} interleaved rounds, "
             f"in-process time of `_discover_entrypoint_backends()`:", ""]
    lines += table(["variant", "median", "IQR", "stock ÷ variant", "CPU median", "stock ÷ variant (CPU)",
                    "a second call (median)"], "lrrrrrr", rows)
    load = ", ".join(f"{x:.1f}" for x in result["load_average"])
    ratio = result["variants"]["switch"]["ratio"]
    cpu_ratio = result["variants"]["switch"]["cpu_ratio"]
    pth = result["pth"]
    lines += ["", "A second call in the same process is the floor under the first: `full` checks "
              "every watched file again (one stat each), `paths` the search paths only. "
              f"Load average at the end: {load} on {result['machine']['cpus']} CPUs.",
              "", f"Target: switch ≥ {TARGET:.0f}× cheaper than stock: "
              f"{'met' if ratio >= TARGET else 'NOT met'} ({ratio:.1f}×; CPU time "
              f"{cpu_ratio:.1f}×).",
              "", ".pth hook in a process that looks nothing up (-X importtime, median): "
              f"{pth['off']:.2f} ms with the switch unset, {pth['on']:.2f} ms with "
              "EPLOAD_IMPORTLIB=1 (pure Python; no native module loaded)."]
    return "\n".join(lines) + "\n"

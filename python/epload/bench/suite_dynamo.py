"""The first dynamo-backend discovery of a real PyTorch process, stock
against EPLOAD_IMPORTLIB=1, timed in-process (the first and a second
`_discover_entrypoint_backends()`, wall and CPU time), interleaved:

  stock         importlib.metadata's own entry_points (a full scan)
  switch        EPLOAD_IMPORTLIB=1: epload's index, `full` validation
  switch-paths  EPLOAD_IMPORTLIB=1 EPLOAD_VALIDATE=paths
  floor         the switch's process, timing only the stat calls of `full`
                (every search path and watched file, the same code on the
                same two threads, build/bench/_epload_floor_stats)

each checked first.  Also the .pth hook's price where nothing is looked up.
"""

from __future__ import annotations

import glob
import os
import statistics
import sys

from . import options
from .envs import SOURCE_DIR, clean_env, config, kept_env, torch_python
from .proc import BenchError, capture, interleaved, marked, progress_line
from .report import fmt_ratio, table, write_report
from .stats import summarize
from .suite_torch import hook_import_ns

PROG = "bench_dynamo.py"
GROUP = "torch_dynamo_backends"
MARK = "EPLOAD-BENCH-DYNAMO "
FIXTURES = [os.path.join(SOURCE_DIR or "", "tests", "torch", "backends", d) for d in ("common", "dynamo")]
VARIANTS = {
    "stock": {},
    "switch": {"EPLOAD_IMPORTLIB": "1"},
    "switch-paths": {"EPLOAD_IMPORTLIB": "1", "EPLOAD_VALIDATE": "paths"},
    "floor": {"EPLOAD_IMPORTLIB": "1"},  # the switch's process, FLOOR_CODE
}
TARGET = 20.0

CODE = r'''
import sys, time, json
sys.path += {paths!r}
import torch
from torch._dynamo.backends import registry
import importlib.metadata as md
fresh = registry._discover_entrypoint_backends.cache_info().currsize == 0
t0, c0 = time.perf_counter_ns(), time.process_time_ns()
registry._discover_entrypoint_backends()
dt, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
t0 = time.perf_counter_ns()
md.entry_points(group="torch_dynamo_backends")
again = time.perf_counter_ns() - t0
print({mark!r} + json.dumps({{"ns": dt, "cpu_ns": cpu, "again_ns": again, "fresh": fresh,
                              "by": md.entry_points.__module__, "names": sorted(registry._BACKENDS)}}))
'''

# The floor under the switch's first call: in the same kind of process at the
# same point, the first `full` check after `import torch` of the index that
# call reads (read untimed), and a second one.
FLOOR_CODE = r'''
import sys, time, json
sys.path += {paths!r}
import torch
from torch._dynamo.backends import registry
sys.path.insert(0, {floor_dir!r})
import _epload_floor_stats as floor
del sys.path[0]
from epload._entry_points import _INTERPRETER
index = floor.read(list(sys.path), _INTERPRETER, "torch_dynamo_backends")
t0, c0 = time.perf_counter_ns(), time.process_time_ns()
valid, why, stats = floor.check(index)
dt, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
t0 = time.perf_counter_ns()
floor.check(index)
again = time.perf_counter_ns() - t0
print({mark!r} + json.dumps({{"ns": dt, "cpu_ns": cpu, "again_ns": again, "fresh": valid,
                              "by": "floor", "why": why, "stats": stats}}))
'''


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    options.add_common(p, rounds=(11, 3), warmup=(0, 0), python=None, plot=False,
                       python_help="the torch venv's python (default: scripts/torch_env.py's)",
                       env_dir="where the generated environment is kept (default: under the build)")
    p.add_argument("--dists", type=options.at_least("--dists", 2), default=6000,
                   help="distributions generated (6000)")
    options.add_count(p, "--pth-rounds", (21, 5), ".pth cost samples")
    args = options.finish(p, p.parse_args(argv))
    args.floor_dir = os.path.join(args.build, "bench")
    if not glob.glob(os.path.join(args.floor_dir, "_epload_floor_stats.*.so")):
        p.error(f"no {args.floor_dir}/_epload_floor_stats.*.so (the floor, "
                "bench/floor_stats_module.cpp): build first (scripts/setup.sh) or pass --build DIR")
    return args


def check(answers, dists):
    """Refuses a variant not answered by the right module or not finding
    stock's, and a floor whose check failed or stat'ed fewer files than
    there are distributions."""
    stock = answers["stock"]["names"]
    for name, got in answers.items():
        if name == "floor":
            if not got["fresh"] or got["by"] != "floor" or got["stats"] < dists:
                raise BenchError(f"the floor did not check the switch's index: {got} (want a "
                                 f"passing check of at least {dists} files)")
            continue
        by = "importlib.metadata" if name == "stock" else "epload._entry_points"
        if not got["fresh"] or got["by"] != by or got["names"] != stock \
                or "epload_fixture" not in got["names"] or len(got["names"]) < 2:
            raise BenchError(f"variant {name} did not do its job: {got} (want answered by {by}, "
                             f"the names of stock: {stock})")


def sample(argv, env):
    """One timed run; a floor whose check failed (a shorter, wrong pass) stops the run."""
    got = marked(argv, env, MARK)[0]
    if got["by"] == "floor" and not got["fresh"]:
        raise BenchError(f"the floor's check failed in a timed round: {got['why']}")
    return got


def run(args, tmp):
    args.python = args.python or torch_python(args.build, "bench_dynamo.py")
    env_dir = args.env_dir or os.path.join(args.build, "bench-dynamo", f"env-{args.dists}")
    manifest = kept_env("bench_dynamo", sys.executable, env_dir, 1, args.dists - 1, GROUP)
    paths = [manifest["search_path"], *FIXTURES]
    argv = [args.python, "-I", "-c", CODE.format(paths=paths, mark=MARK)]
    argvs = {n: argv for n in VARIANTS}
    argvs["floor"] = [args.python, "-I", "-c",
                      FLOOR_CODE.format(paths=paths, floor_dir=args.floor_dir, mark=MARK)]
    base = clean_env(tmp)
    envs = {name: dict(base, **extra) for name, extra in VARIANTS.items()}
    # In this order: the switch's run writes the cache file the floor reads.
    check({name: marked(argvs[name], env, MARK)[0] for name, env in envs.items()}, args.dists)
    raw = interleaved(argvs, None, args.rounds, args.warmup, tmp,
                      progress_line, envs=envs, runner=lambda a, e, _: sample(a, e))
    result = {"config": config(args, dists=args.dists), "variants": {}}
    stock = statistics.median(raw["stock"]["ns"])
    stock_cpu = statistics.median(raw["stock"]["cpu_ns"])
    for name, r in raw.items():
        s = result["variants"][name] = summarize(r["ns"])
        cpu = statistics.median(r["cpu_ns"])
        s.update(ratio=stock / 1e6 / s["median_ms"], samples_ms=[x / 1e6 for x in r["ns"]],
                 again_ms=statistics.median(r["again_ns"]) / 1e6, cpu_median_ms=cpu / 1e6,
                 cpu_ratio=stock_cpu / cpu, cpu_samples_ms=[x / 1e6 for x in r["cpu_ns"]])
    result["pth"] = pth_cost(args.python, base, args.pth_rounds)
    write_report(result, markdown, md_out=args.md_out, json_out=args.json_out)
    return 0


PTH_PROBE = 'import sys; print("PTH", "epload" in sys.modules, "epload._native" in sys.modules)'


def pth_cost(python, base, rounds):
    """The .pth hook's import time (ms, medians), the switch off and on."""
    out = {"off": [], "on": []}
    for _ in range(rounds):
        for name, extra in (("off", {}), ("on", {"EPLOAD_IMPORTLIB": "1"})):
            proc = capture([python, "-X", "importtime", "-c", PTH_PROBE], dict(base, **extra))
            if proc.stdout.split() != ["PTH", str(name == "on"), "False"]:
                raise BenchError(f".pth probe ({name}) printed {proc.stdout!r}, want epload "
                                 "imported only with the switch and never its native module:\n"
                                 f"{proc.stderr[-2000:]}")
            out[name].append(hook_import_ns(proc.stderr, missing=0) / 1e6)
    return {name: statistics.median(v) for name, v in out.items()}


def markdown(result):
    cfg, pth = result["config"], result["pth"]
    rows = [[name, f"{v['median_ms']:.2f} ms", f"{v['q1_ms']:.2f}–{v['q3_ms']:.2f} ms",
             fmt_ratio(v["ratio"]), f"{v['cpu_median_ms']:.2f} ms", fmt_ratio(v["cpu_ratio"]),
             f"{v['again_ms']:.2f} ms"]
            for name, v in result["variants"].items()]
    v = result["variants"]
    ratio, cpu_ratio, floor = v["switch"]["ratio"], v["switch"]["cpu_ratio"], v["floor"]["ratio"]
    verdict = ("met" if ratio >= TARGET else "floor binds" if floor < TARGET
               else f"not met, floor {floor:.1f}×")
    load = ", ".join(f"{x:.1f}" for x in cfg["load_average_after"])
    return "\n".join([
        f"First dynamo-backend discovery after `import torch` (torch 2.13.0), "
        f"{cfg['dists']:,} distributions, {cfg['rounds']} interleaved rounds, "
        f"in-process time of `_discover_entrypoint_backends()`:", ""] + table(
        ["variant", "median", "IQR", "stock ÷ variant", "CPU median", "stock ÷ variant (CPU)",
         "a second call (median)"], "lrrrrrr", rows)
        + ["", "floor: the same process timing only `full`'s stat calls (every search path and "
           "watched file, the same code, two threads); a second call: `full` stats all again, "
           f"`paths` the search paths. Load average at the end: {load} on "
           f"{cfg['machine']['cpus']} CPUs.",
           "", f"Target: switch ≥ {TARGET:.0f}× cheaper than stock: {verdict} (stock ÷ switch "
           f"{ratio:.1f}×, stock ÷ floor {floor:.1f}×; CPU {cpu_ratio:.1f}×).",
           "", ".pth hook in a process that looks nothing up (-X importtime, median): "
           f"{pth['off']:.2f} ms with the switch unset, {pth['on']:.2f} ms with "
           "EPLOAD_IMPORTLIB=1 (pure Python; no native module loaded)."]) + "\n"

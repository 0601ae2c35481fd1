"""The first dynamo-backend discovery of a real PyTorch process, stock
against EPLOAD_IMPORTLIB=1, timed in-process (the first and a second
`_discover_entrypoint_backends()`, wall and CPU time), interleaved:

  stock         importlib.metadata's own entry_points (a full scan)
  switch        EPLOAD_IMPORTLIB=1: epload's index, `full` validation
  switch-paths  EPLOAD_IMPORTLIB=1 EPLOAD_VALIDATE=paths

each checked first.  Also the .pth hook's price where nothing is looked up.
"""

from __future__ import annotations

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
t0, c0 = time.perf_counter_ns(), time.process_time_ns()
registry._discover_entrypoint_backends()
dt, cpu = time.perf_counter_ns() - t0, time.process_time_ns() - c0
t0 = time.perf_counter_ns()
md.entry_points(group="torch_dynamo_backends")
again = time.perf_counter_ns() - t0
print({mark!r} + json.dumps({{"ns": dt, "cpu_ns": cpu, "again_ns": again, "fresh": fresh,
                              "by": md.entry_points.__module__, "names": sorted(registry._BACKENDS)}}))
'''


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    options.add_common(p, rounds=(11, 3), warmup=(0, 0), python=None, plot=False,
                       python_help="the torch venv's python (default: scripts/torch_env.py's)",
                       env_dir="where the generated environment is kept (default: under the build)")
    p.add_argument("--dists", type=options.at_least("--dists", 2), default=6000,
                   help="distributions generated (6000)")
    options.add_count(p, "--pth-rounds", (21, 5), ".pth cost samples")
    return options.finish(p, p.parse_args(argv))


def check(answers):
    """Refuses a variant not answered by the right module or not finding stock's."""
    stock = answers["stock"]["names"]
    for name, got in answers.items():
        by = "importlib.metadata" if name == "stock" else "epload._entry_points"
        if not got["fresh"] or got["by"] != by or got["names"] != stock \
                or "epload_fixture" not in got["names"] or len(got["names"]) < 2:
            raise BenchError(f"variant {name} did not do its job: {got} (want answered by {by}, "
                             f"the names of stock: {stock})")


def run(args, tmp):
    args.python = args.python or torch_python(args.build, "bench_dynamo.py")
    env_dir = args.env_dir or os.path.join(args.build, "bench-dynamo", f"env-{args.dists}")
    manifest = kept_env("bench_dynamo", sys.executable, env_dir, 1, args.dists - 1, GROUP)
    argv = [args.python, "-I", "-c", CODE.format(paths=[manifest["search_path"], *FIXTURES],
                                                   mark=MARK)]
    base = clean_env(tmp)
    envs = {name: dict(base, **extra) for name, extra in VARIANTS.items()}
    check({name: marked(argv, env, MARK)[0] for name, env in envs.items()})
    raw = interleaved({n: argv for n in VARIANTS}, None, args.rounds, args.warmup, tmp,
                      progress_line, envs=envs, runner=lambda a, e, _: marked(a, e, MARK)[0])
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
    ratio, cpu_ratio = result["variants"]["switch"]["ratio"], result["variants"]["switch"]["cpu_ratio"]
    load = ", ".join(f"{x:.1f}" for x in cfg["load_average_after"])
    return "\n".join([
        f"First dynamo-backend discovery after `import torch` (torch 2.13.0), "
        f"{cfg['dists']:,} distributions, {cfg['rounds']} interleaved rounds, "
        f"in-process time of `_discover_entrypoint_backends()`:", ""] + table(
        ["variant", "median", "IQR", "stock ÷ variant", "CPU median", "stock ÷ variant (CPU)",
         "a second call (median)"], "lrrrrrr", rows)
        + ["", "A second call in the same process is the floor under the first: `full` checks "
           "every watched file again (one stat each), `paths` the search paths only. "
           f"Load average at the end: {load} on {cfg['machine']['cpus']} CPUs.",
           "", f"Target: switch ≥ {TARGET:.0f}× cheaper than stock: "
           f"{'met' if ratio >= TARGET else 'NOT met'} ({ratio:.1f}×; CPU {cpu_ratio:.1f}×).",
           "", ".pth hook in a process that looks nothing up (-X importtime, median): "
           f"{pth['off']:.2f} ms with the switch unset, {pth['on']:.2f} ms with "
           "EPLOAD_IMPORTLIB=1 (pure Python; no native module loaded)."]) + "\n"

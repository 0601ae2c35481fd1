"""epload's main job, measured: what a program pays at start for 1,000 plugin
backends among 5,000 installed distributions, with and without epload.

Steps: a native environment, lookups and loads (whole processes), then
bench_startup.py and bench_torch.py --quick.  Run by scripts/demo.sh.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import json

from . import options, suite_index, suite_startup, suite_torch
from .envs import SOURCE_DIR, clean_env, config, kept_env, torch_python
from .proc import BenchError, capture, harness_main, interleaved, log
from .report import TIMES, fmt_ms, load_average, table, times, write_report
from .stats import summarize_rounds

PROG = "demo.py"
LOOKUPS = ("bare", "importlib", "importlib-same", "cold", "full", "paths")
# The loads, in report order: name -> (label, arguments after `epload load
# DEVICE --path ... --group GROUP`).
LOADS = {f"{mode}-{index}": (f"epload load, {mode}, {what}", ["--mode", mode, *extra])
         for mode in ("eager", "lazy")
         for index, what, extra in (("cold", "cold index", ["--no-cache"]),
                                    ("cached", "cached index", []),
                                    ("paths", "cached index, `--validate paths`",
                                     ["--validate", "paths"]))}
LABELS = dict({n: suite_index.COMMANDS[n] for n in LOOKUPS}, **{n: v[0] for n, v in LOADS.items()})
PHASES = ("index_us", "create_us", "start_us", "lookup_us", "total_us")


class Demo:
    """The index suite's lookups (the environment last on sys.path) and the loads."""

    def __init__(self, args, manifest, tmp):
        self.args, self.env = args, clean_env(tmp)
        self.site, self.backends = manifest["search_path"], manifest["backends"]
        self.device = args.device or self.backends[len(self.backends) // 2]["device"]
        if self.device not in {b["device"] for b in self.backends}:
            raise BenchError(f"--device {self.device}: no generated backend provides it "
                             f"(devices are {self.backends[0]['device']} ... "
                             f"{self.backends[-1]['device']})")
        self.setup = suite_index.Setup(args, self.site, tmp, self.env, None, site_first=False,
                                       cache_dir=os.path.join(args.out, "cache"))
        cmds = dict(self.setup.py, **self.setup.epload)
        self.commands = {n: cmds[n] for n in LOOKUPS}
        for n, (_, extra) in LOADS.items():
            self.commands[n] = [args.epload, "load", self.device, *self.setup.paths, "--group",
                                args.group, *extra] + (
                [] if "--no-cache" in extra else ["--cache-dir", self.setup.cache_dir])

    def verify(self):
        """Warms and checks every command; the phases of `epload load --json`."""
        n = len(self.backends)
        self.setup.check_answers(self.args.python, self.env, n)
        self.setup.warm(self.env, {f"`{LABELS['lazy-cached']}`": self.commands["lazy-cached"]})
        phases = {}
        for v in LOADS:
            runs = [json.loads(capture(self.commands[v] + ["--json"], self.env).stdout)
                    for _ in range(self.args.phase_runs)]
            out = runs[-1]
            loaded = [b for b in out["loaded"] if b["state"] == "ready"]
            expect = n if v.startswith("eager") else 1
            if not out["ok"] or len(out["loaded"]) != expect or len(loaded) != expect:
                raise BenchError(f"`{LABELS[v]}` loaded {len(loaded)} of {len(out['loaded'])} "
                                 f"backends ({'ok' if out['ok'] else out['error']}); "
                                 f"expected {expect}")
            phases[v] = {k: statistics.median(r[k] for r in runs) / 1e3 for k in PHASES}
            phases[v]["backends_loaded"] = len(loaded)
            phases[v]["provider"] = out["backend"]
        return phases


def markdown(result):
    """The lookup table, the load table and the derived ratios."""
    cfg, st, ph, d = result["config"], result["stats"], result["phases"], result["derived"]
    imp = (d["importlib_marginal_ms"], d["importlib_marginal_cpu_ms"])
    same = (d["importlib_same_output_marginal_ms"], d["importlib_same_output_marginal_cpu_ms"])
    marginals = {"bare": ["", ""],
                 "importlib": [f"marginal: {fmt_ms(imp[0])} ms ({fmt_ms(imp[1])} CPU)", ""],
                 "importlib-same": ["", f"marginal: {fmt_ms(same[0])} ms ({fmt_ms(same[1])} CPU)"]}
    rows = [[LABELS[v]] + times(st[v]) + (marginals.get(v) or [
        f"**{m / st[v]['median_ms']:.1f}×** (CPU {c / st[v]['cpu_median_ms']:.1f}×)"
        for m, c in (imp, same)]) for v in LOOKUPS]
    L = [f"### Start-up cost: {cfg['backends']:,} native backends among "
         f"{cfg['noise']:,} other distributions\n",
         f"Whole processes, {cfg['rounds']} interleaved rounds (medians; CPU = user + sys); "
         f"{cfg['machine']['cpus']} CPUs, {load_average(cfg)}.\n",
         f"**Entry-point lookup** (group `{cfg['group']}`):\n"]
    L += table(["command", *TIMES, "importlib's marginal cost ÷ this: lookup alone",
                "same output"], "lrrrrr", rows)
    L += ["", f"**Backend loading**: `epload load {cfg['device']}` (whole process), and when "
              f"{cfg['device']} was ready inside it (`--json`, median of "
              f"{cfg['phase_runs']} runs):\n"]
    L += table(["command", *TIMES, "backends loaded", "index ready ms",
                "first device ready ms"], "lrrrrrr",
               [[LABELS[v]] + times(st[v]) + [f"{ph[v]['backends_loaded']:,}",
                                              fmt_ms(ph[v]["index_us"]), fmt_ms(ph[v]["total_us"])]
                for v in LOADS])
    L += ["", f"Eager ÷ lazy (whole process): cold index **{d['eager_over_lazy_cold']:.1f}×**, "
              f"cached index **{d['eager_over_lazy_cached']:.1f}×** (CPU "
              f"{d['eager_over_lazy_cached_cpu']:.1f}×), cached index with `paths` validation "
              f"**{d['eager_over_lazy_paths']:.1f}×**. Cached ÷ cold index, lazy: "
              f"{d['lazy_cached_over_cold']:.2f}. First device ready, lazy with a cached index: "
              f"{fmt_ms(ph['lazy-cached']['total_us'])} ms after the process's main() started "
              f"(eager: {fmt_ms(ph['eager-cached']['total_us'])} ms).\n"]
    return "\n".join(L) + "\n"


def derive(stats):
    """importlib's marginal costs, and eager over lazy and cached over cold."""
    med = {n: s["median_ms"] for n, s in stats.items()}
    cpu = {n: s["cpu_median_ms"] for n, s in stats.items()}
    return {
        "importlib_marginal_ms": med["importlib"] - med["bare"],
        "importlib_marginal_cpu_ms": cpu["importlib"] - cpu["bare"],
        "importlib_same_output_marginal_ms": med["importlib-same"] - med["bare"],
        "importlib_same_output_marginal_cpu_ms": cpu["importlib-same"] - cpu["bare"],
        "eager_over_lazy_cold": med["eager-cold"] / med["lazy-cold"],
        "eager_over_lazy_cached": med["eager-cached"] / med["lazy-cached"],
        "eager_over_lazy_cached_cpu": cpu["eager-cached"] / cpu["lazy-cached"],
        "eager_over_lazy_paths": med["eager-paths"] / med["lazy-paths"],
        "lazy_cached_over_cold": med["lazy-cached"] / med["lazy-cold"],
    }


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    options.add_common(p, rounds=(9, 9), outputs=False, quick=False)
    p.add_argument("--out", default=os.path.join(SOURCE_DIR or os.getcwd(), "out", "demo"),
                   help="where results and environments go (<source>/out/demo)")
    options.add_lookup(p)
    p.add_argument("--device", help="the device to load (default: the middle backend's)")
    options.add_count(p, "--phase-runs", (3, 3), "`epload load --json` runs for the in-process "
                      "phases", quick=False)
    for stem, skip in (("startup", ""), ("torch", "; also EPLOAD_SKIP_TORCH=1")):
        p.add_argument(f"--{stem}-sizes", default="10,100,1000",
                       help=f"backend counts for the {stem} suite (%(default)s)")
        p.add_argument(f"--{stem}-rounds", type=int, help="rounds (default: its --quick's)")
        p.add_argument(f"--no-{stem}", action="store_true", help=f"skip the {stem} suite{skip}")
    p.add_argument("--startup-noise", type=int,
                   help="ordinary distributions for the startup suite (default: --noise)")
    args = options.finish(p, p.parse_args(argv), built=True)
    args.no_torch = args.no_torch or os.environ.get("EPLOAD_SKIP_TORCH") == "1"
    args.out = os.path.abspath(args.out)
    if args.startup_noise is None:
        args.startup_noise = args.noise
    return args


def suite(args, module, stem, rounds, extra):
    """Runs a suite with --quick, its outputs in OUT/STEM.*; returns its files."""
    log(f"demo: scripts/bench_{stem}.py --quick ...")
    out = [os.path.join(args.out, f"{stem}.{k}") for k in ("md", "json", "png")]
    sys.stdout.write("\n")
    sys.stdout.flush()
    argv = ["--quick", "--build", args.build, "--env-dir", os.path.join(args.out, f"{stem}-envs"),
            *map(str, extra + (["--rounds", rounds] if rounds else [])),
            "--md-out", out[0], "--json-out", out[1], "--plot", out[2]]
    status = harness_main(module, argv)
    if status != 0:
        raise BenchError(f"the {stem} suite failed (exit {status}); its options: "
                         f"{' '.join(argv)}")
    return out


def start_up_table(args, tmp):
    """Steps 1 and 2: demo.md and demo.json, printed; returns the files."""
    manifest = kept_env("demo", args.python, os.path.join(args.out, "env"), args.backends,
                        args.noise, args.group, kind="native")
    d = Demo(args, manifest, tmp)
    log("demo: checking and warming every command ...")
    phases = d.verify()
    log(f"demo: timing {len(d.commands)} commands x {args.warmup + args.rounds} "
        "interleaved rounds ...")
    cfg = config(args, backends=args.backends, noise=args.noise, group=args.group, device=d.device,
                 phase_runs=args.phase_runs, epload=args.epload,
                 environment=os.path.join(args.out, "env"))
    stats = summarize_rounds(interleaved(d.commands, d.env, args.rounds, args.warmup, tmp))
    result = {"config": cfg, "commands": d.commands, "stats": stats, "phases": phases,
              "derived": derive(stats)}
    files = [os.path.join(args.out, n) for n in ("demo.md", "demo.json")]
    sys.stdout.write("\n")
    write_report(result, markdown, md_out=files[0], json_out=files[1])
    return files


def run(args, tmp):
    """Every step; prints where the files are."""
    t_start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    files = start_up_table(args, tmp)
    if not args.no_startup:  # step 3: Python backends
        files += suite(args, suite_startup, "startup", args.startup_rounds,
                       ["--python", args.python, "--sizes", args.startup_sizes,
                        "--noise", args.startup_noise])
    if args.no_torch:
        print("\nReal-PyTorch comparison skipped (--no-torch or EPLOAD_SKIP_TORCH=1).")
    else:  # step 4: real PyTorch, in the venv of scripts/torch_env.py (made once, reused)
        files += suite(args, suite_torch, "torch", args.torch_rounds,
                       ["--python", torch_python(args.build, "demo"), "--sizes", args.torch_sizes])
    print(f"\nDone in {time.monotonic() - t_start:.0f} s. Files:")
    for f in files:
        print(f"  {f}")
    print(f"  {os.path.join(args.out, 'env')}/ (the generated environment; reused by the next run)")
    return 0

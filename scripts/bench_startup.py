#!/usr/bin/python3
"""Whole-process start-up harness for Python backends: what a Python program
pays at start for its plugin backends, with importlib.metadata, stevedore,
PyTorch's own autoload loop, and epload (eager, lazy, `paths` validation).

For each number of backends (--sizes, default 10, 100 and 1,000) among
--noise ordinary distributions (default 5,000), one environment is generated
with `scripts/gen_env.py --kind python` and these variants (their commands
and checks: scripts/startup_variants.py) are timed as whole processes,
interleaved round by round (scripts/harness_common.py):

  bare             the interpreter with the common prelude (below), nothing else
  importlib        + importlib.metadata.entry_points(group="torch.backends")
  stevedore        + stevedore's cached lookup (_cache.get_group_all, what
                   ExtensionManager uses), cache warmed first; "not installed"
                   when python3-stevedore is absent
  pytorch-eager    + `import torch`: a fixture host package whose __init__ ends
                   with stock PyTorch's switch and loop (stock_autoload.py:
                   importlib discovery, then import and call every backend)
  floor-native     + `import _epload_floor` (build/bench): an empty extension
                   module linked like epload._native, so the cost of loading
                   the shared libraries any module built on epload's stack
                   needs (libsimdjson, libstdc++, libgcc_s): a floor no code
                   of ours can lower
  epload-import    + `import epload`
  epload-ep        + epload.entry_points(group="torch.backends"), cached index,
                   default (`full`) validation
  epload-ep-paths  the same with EPLOAD_VALIDATE=paths
  epload-eager     + `import torch`, the same host with its loop replaced by
                   epload.autoload(group="torch.backends", host=__name__) and
                   EPLOAD_MODE=eager: every backend imported and called
  epload-lazy      the same, EPLOAD_MODE=lazy (devices learned by an earlier
                   run): no backend imported, nothing used
  epload-lazy-paths  the same with EPLOAD_VALIDATE=paths
  epload-lazy-first  epload-lazy, then the first use of one device
                   (`torch.devNNNN` of the middle backend): time to first device

Every variant runs the same way, so that they differ only by what is measured:

* `/usr/bin/python3 -I -S -c "<prelude>; <variant>"`.  -I: no PYTHON*
  variables, no user site, no script directory on sys.path; -S: no
  site-packages of the machine, so the only distributions are the generated
  ones.  Nothing else is on the command line.
* The prelude is identical text in every variant apart from the dict of
  environment variables it sets:
      import os, sys; os.environ.update({...});
      sys.path[0:0] = [<build>/python]; sys.path += [HOSTDIR, SITE]
  <build>/python goes where PYTHONPATH would put it (before the standard
  library; -I ignores PYTHONPATH itself), the host package and the generated
  site-packages go where site-packages sit in a normal interpreter (after the
  standard library, so importing a standard module never lists the 5,000-entry
  directory).  Importing os costs the bare variant too (a normal interpreter
  imports it in site).  The variables (EPLOAD_MODE, EPLOAD_VALIDATE and the
  host's switch between PyTorch's loop and epload's) are set in the prelude
  rather than in the process environment, so that the command lines alone
  define the variants (the same commands run under strace and hyperfine).
* The timed processes share one clean environment (PATH, HOME, LC_ALL and an
  XDG_CACHE_HOME in the run's temporary directory, which holds epload's index
  and learned-device files and stevedore's cache).
* stevedore is importable only from /usr/lib/python3/dist-packages, which is
  appended for its import and removed again before the lookup (stevedore keys
  its cache on sys.path), as in scripts/bench_index.py.

Before timing, each size is warmed and every variant is verified by running
it once with a check appended (after the measured work): the lookups must
find exactly the generated backends; pytorch-eager and epload-eager must have
imported every backend module and set every device attribute on the host;
epload-lazy must have imported no backend and set no device (and
epload-lazy-first exactly one of each); the epload variants must report an
index cache hit (EPLOAD_DEBUG=1, in the check run only).  A variant that does
not do its job stops the run with a message saying what was wrong.

Reported per variant and size: wall-time median and interquartile range,
median CPU time (user + sys of the child, from wait4), and the marginal cost
over `bare` (wall and CPU).  Ratios are reference marginal ÷ variant marginal,
both from the same run (references: importlib, stevedore, pytorch-eager);
a marginal within noise of zero (<= 0) has no ratio.  The start-up targets
are judged at the size with the most distributions (6,000 by default).
System calls (strace -f -c, one run each) and a hyperfine -N pass are taken at
the largest size.

Each ratio target's budget (the reference's marginal cost divided by the
ratio) is set beside its floor from the same run: floor-native's marginal
cost, plus for the variants that check every file (`full` validation) the
bare cost of those stat calls shared by the machine's CPUs (epload_bench's
BM_CacheStatBaseline at the same number of distributions, CPU time / CPUs;
skipped when build/bench/epload_bench is absent).  A budget below its floor
says the target cannot be reached on this machine, whatever epload does.

Output: a Markdown report on stdout (and --md-out), everything as JSON with
--json-out, and with --plot a PNG of the marginal cost against the number of
backends, one line per variant, log-scale y (matplotlib, Agg backend).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_common import (  # noqa: E402
    SOURCE_DIR, BenchError, clean_env, ensure_env, fmt_ms, generate, harness_main,
    hyperfine_pass, interleaved, log, machine, parse_sizes, stevedore_location, strace_counts,
    summarize_rounds, write_report)
from startup_variants import GROUP, VARIANTS, Size, write_host  # noqa: E402

REFERENCES = ("importlib", "stevedore", "pytorch-eager")

# The start-up targets: (variant, reference, minimum ratio reference ÷ variant).
RATIO_TARGETS = [
    ("epload-ep", "importlib", 40.0),
    ("epload-ep", "stevedore", 10.0),
    ("epload-ep-paths", "importlib", 300.0),
    ("epload-ep-paths", "stevedore", 80.0),
    ("epload-lazy", "pytorch-eager", 20.0),
]
IMPORT_TARGET_MS = 2.0
# Variants whose index check stats every watched file (`full` validation):
# their floor includes the bare cost of those stats.
FULL_CHECK = ("epload-ep", "epload-lazy")

# ------------------------------------------------------------- analysis ---

def analyse(raw):
    stats = summarize_rounds(raw)
    bare, bare_cpu = stats["bare"]["median_ms"], stats["bare"]["cpu_median_ms"]
    for v, s in stats.items():
        s["marginal_ms"] = s["median_ms"] - bare
        s["marginal_cpu_ms"] = s["cpu_median_ms"] - bare_cpu
    ratios = {}
    for v, s in stats.items():
        ratios[v] = {}
        for ref in REFERENCES:
            if ref not in stats or ref == v:
                continue
            m, mc = s["marginal_ms"], s["marginal_cpu_ms"]
            ratios[v][ref] = {
                "wall": stats[ref]["marginal_ms"] / m if m > 0 else None,
                "cpu": stats[ref]["marginal_cpu_ms"] / mc if mc > 0 else None,
            }
    return stats, ratios


def judge(sizes, stat_base=None):
    """The start-up targets at the size with the most distributions, each ratio
    target with its budget (the reference's marginal ÷ the ratio) beside its
    floor: floor-native's marginal, plus for FULL_CHECK variants the bare
    stats' CPU time shared by the CPUs (stat_base: {"cpu_ms", "cpus",
    "stats"} at this size, or None when epload_bench is absent)."""
    row = max(sizes, key=lambda r: (r["distributions"], r["backends"]))
    st, ra = row["stats"], row["ratios"]
    out = []
    m = st["epload-import"]["marginal_ms"] if "epload-import" in st else None
    out.append({"target": f"`import epload` ≤ {IMPORT_TARGET_MS:g} ms (marginal)",
                "variant": "epload-import", "reference": None, "needed": IMPORT_TARGET_MS,
                "measured": m, "measured_cpu": st.get("epload-import", {}).get("marginal_cpu_ms"),
                "met": None if m is None else m <= IMPORT_TARGET_MS,
                "backends": row["backends"], "distributions": row["distributions"]})
    for v, ref, need in RATIO_TARGETS:
        t = {"target": f"{VARIANTS[v][0]}: ≤ 1/{need:g} of {ref}'s marginal cost",
             "variant": v, "reference": ref, "needed": need,
             "backends": row["backends"], "distributions": row["distributions"]}
        if ref not in st:
            t.update(measured=None, measured_cpu=None, met=None,
                     note=f"{ref} not installed" if ref == "stevedore" else f"{ref} not measured")
        else:
            r = ra[v][ref]
            t.update(measured=r["wall"], measured_cpu=r["cpu"],
                     met=None if r["wall"] is None else r["wall"] >= need)
            if r["wall"] is None:
                t["note"] = "marginal cost within noise of zero"
            if "floor-native" in st:
                t["budget_ms"] = st[ref]["marginal_ms"] / need
                t["floor_libraries_ms"] = st["floor-native"]["marginal_ms"]
                if v in FULL_CHECK and stat_base:
                    t["floor_stats_ms"] = stat_base["cpu_ms"] / stat_base["cpus"]
                if v not in FULL_CHECK or "floor_stats_ms" in t:
                    t["floor_ms"] = t["floor_libraries_ms"] + t.get("floor_stats_ms", 0.0)
                    t["reachable"] = t["budget_ms"] >= t["floor_ms"]
        out.append(t)
    return out


# --------------------------------------------------------------- report ---

def fmt_ratio(r):
    if r is None:
        return "n/a"
    return f"{r:,.0f}×" if r >= 100 else f"{r:.1f}×"


def markdown(result):
    cfg = result["config"]
    L = []
    L.append(f"### Python-backend start-up: {', '.join(f'{n:,}' for n in cfg['sizes'])} backends "
             f"among {cfg['noise']:,} ordinary distributions\n")
    la, lb = cfg.get("load_average_before"), cfg.get("load_average_after")
    L.append(f"{cfg['runs']} interleaved rounds per size after {cfg['warmup']} warm-up; "
             f"whole-process medians; {cfg['machine']['cpus']} CPUs"
             + (f", 1-minute load average {la[0]:.2f} before and {lb[0]:.2f} after" if la and lb
                else "")
             + f"; backends' import cost {cfg['import_cost_ms']:g} ms.\n")
    for row in result["sizes"]:
        L += size_table(row)
        if row.get("strace") or row.get("hyperfine"):
            L += syscall_table(row)
        L.append("")
    L.append("Ratios are the reference's marginal cost ÷ the variant's (marginal = median − "
             "bare median), wall time, same run; n/a when the variant's marginal is within "
             "noise of zero.\n")
    if len(result["sizes"]) > 1:
        L += marginal_table(result["sizes"])
    L += targets_table(result)
    return "\n".join(L) + "\n"


def size_table(row):
    """One size's table: every variant's times, marginals and ratios."""
    st, ra = row["stats"], row["ratios"]
    L = [f"#### {row['backends']:,} backends ({row['distributions']:,} distributions)\n",
         "| variant | median ms | IQR ms | CPU ms | marginal ms | marginal CPU ms | "
         "importlib ÷ | stevedore ÷ | PyTorch-eager ÷ |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in VARIANTS:
        label = VARIANTS[v][0]
        if v not in st:
            why = "not built" if v == "floor-native" else "not installed"
            L.append(f"| {label} | {why} | | | | | | | |")
            continue
        s = st[v]
        cols = []
        for ref in REFERENCES:
            if v == ref:
                cols.append("1")
            elif ref not in st:
                cols.append("not installed" if ref == "stevedore" else "")
            elif v == "bare":
                cols.append("")
            else:
                cols.append(fmt_ratio(ra[v][ref]["wall"]))
        marg = "" if v == "bare" else fmt_ms(s["marginal_ms"])
        margc = "" if v == "bare" else fmt_ms(s["marginal_cpu_ms"])
        L.append(f"| {label} | {fmt_ms(s['median_ms'])} | {fmt_ms(s['q1_ms'])}–"
                 f"{fmt_ms(s['q3_ms'])} | {fmt_ms(s['cpu_median_ms'])} | {marg} | {margc} | "
                 + " | ".join(cols) + " |")
    return L


def syscall_table(row):
    """The system-call counts and hyperfine medians taken at one size."""
    st = row["stats"]
    sc, hf = row.get("strace") or {}, row.get("hyperfine") or {}
    L = ["", f"System calls at {row['backends']:,} backends (one run each under "
             "`strace -f -c`)" + (" and `hyperfine -N` medians (not interleaved)"
                                  if hf else "") + ":\n",
         "| variant | syscalls | stat | openat | getdents64 |" + (" hyperfine ms |" if hf else ""),
         "|---|---:|---:|---:|---:|" + ("---:|" if hf else "")]
    for v in VARIANTS:
        if v not in st:
            continue
        c = sc.get(v)
        cols = (f"{c['total']:,} | {c['stat']:,} | {c['openat']:,} | "
                f"{c['getdents64']:,}" if c else " | | | ")
        h = f" {fmt_ms(hf[v]['median_ms'])} |" if v in hf else (" |" if hf else "")
        L.append(f"| {VARIANTS[v][0]} | {cols} |{h}")
    return L


def marginal_table(sizes):
    """Every variant's marginal cost at every size, side by side."""
    L = ["#### Marginal cost over the bare interpreter (ms, wall; CPU in parentheses)\n",
         "| variant | " + " | ".join(f"{r['backends']:,} backends" for r in sizes) + " |",
         "|---|" + "---:|" * len(sizes)]
    for v in VARIANTS:
        if v == "bare":
            continue
        cells = []
        for r in sizes:
            s = r["stats"].get(v)
            cells.append("not installed" if s is None else
                         f"{fmt_ms(s['marginal_ms'])} ({fmt_ms(s['marginal_cpu_ms'])})")
        L.append(f"| {VARIANTS[v][0]} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def targets_table(result):
    """The start-up targets: measured, met, and each budget beside its floor."""
    t0 = result["targets"][0]
    L = [f"#### Start-up targets, at {t0['backends']:,} backends "
         f"({t0['distributions']:,} distributions)\n",
         "| target | measured (wall) | CPU time | met | budget ms | floor ms | reachable here |",
         "|---|---:|---:|---|---:|---:|---|"]
    L += ["| " + " | ".join(target_cells(t)) + " |" for t in result["targets"]]
    L.append("")
    if any("floor_libraries_ms" in t for t in result["targets"]):
        sb = result.get("stat_baseline")
        L.append("Budget: the reference's marginal cost ÷ the target ratio, the most epload's "
                 "marginal may cost. Floor: loading the shared libraries epload's module needs "
                 "(floor-native: an empty module linked like it)"
                 + (f", plus for `full` validation its {sb['stats']:,} stat calls alone "
                    f"(epload_bench BM_CacheStatBaseline, {fmt_ms(sb['cpu_ms'])} ms of CPU in "
                    f"process) shared by {sb['cpus']} CPUs" if sb else "")
                 + ": a lower bound no implementation can beat on this machine.\n")
    return L


def target_cells(t):
    """One target's row: target, measured, CPU, met, budget, floor, reachable."""
    if t["reference"] is None:
        meas = "n/a" if t["measured"] is None else f"{fmt_ms(t['measured'])} ms"
        cpu = "n/a" if t["measured_cpu"] is None else f"{fmt_ms(t['measured_cpu'])} ms"
    else:
        meas = fmt_ratio(t["measured"]) if t["measured"] is not None else t.get("note", "n/a")
        cpu = fmt_ratio(t["measured_cpu"])
    if t["met"] is None:
        met = t.get("note", "n/a")
    elif t["met"]:
        met = "yes"
    elif t["reference"] is None:
        met = f"**no** ({fmt_ms(t['measured'])} ms)"
    else:
        met = f"**no** ({fmt_ratio(t['measured'])} of {t['needed']:g}×)"
    budget = fmt_ms(t["budget_ms"]) if "budget_ms" in t else ""
    if "floor_ms" in t:
        floor = fmt_ms(t["floor_ms"])
        if "floor_stats_ms" in t:
            floor += f" ({fmt_ms(t['floor_libraries_ms'])} + {fmt_ms(t['floor_stats_ms'])} stats)"
        reach = "yes" if t["reachable"] else "**no**: the budget is below the floor"
    elif "floor_libraries_ms" in t:
        floor = f"≥ {fmt_ms(t['floor_libraries_ms'])} + stats"
        reach = "n/a (no stat model: epload_bench absent)"
    else:
        floor = reach = ""
    return [t["target"], meas, cpu, met, budget, floor, reach]


def plot(result, path):
    try:
        import matplotlib
    except ImportError:
        raise BenchError(f"--plot needs matplotlib in {sys.executable} "
                         "(apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    xs = [r["backends"] for r in result["sizes"]]
    for v in VARIANTS:
        if v == "bare":
            continue
        pts = [(r["backends"], r["stats"][v]["marginal_ms"]) for r in result["sizes"]
               if v in r["stats"] and r["stats"][v]["marginal_ms"] > 0]
        if not pts:
            continue
        style = "--" if v.startswith("epload") else "-"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=VARIANTS[v][0]
                .replace("`", ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:,}" for x in xs])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"Python backends (among {result['config']['noise']:,} other distributions)")
    ax.set_ylabel("marginal start-up cost over a bare interpreter (ms, median)")
    ax.set_title("Whole-process start-up cost of plugin backends")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ----------------------------------------------------------------- main ---

def progress_line(r, total):
    """Round counter, on a terminal only (no noise in CI logs)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r  round {r + 1}/{total}" + ("\n" if r + 1 == total else ""))
        sys.stderr.flush()


def parse_args(argv):
    doc = __doc__
    p = argparse.ArgumentParser(prog="bench_startup.py", description=doc.split("\n\n")[0],
                                epilog=doc.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10,100,1000",
                   help="numbers of Python backends, comma-separated (10,100,1000)")
    p.add_argument("--noise", type=int, default=5000,
                   help="ordinary distributions beside the backends (5000)")
    p.add_argument("--import-cost-ms", type=float, default=0.0,
                   help="CPU time each backend's import burns (gen_env.py; default 0)")
    p.add_argument("--runs", "--rounds", dest="runs", type=int,
                   help="timed rounds per size (15; --quick: 5)")
    p.add_argument("--warmup", type=int, help="untimed rounds first (2; --quick: 1)")
    p.add_argument("--quick", action="store_true",
                   help="5 rounds, 1 warm-up, no strace or hyperfine pass")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter (/usr/bin/python3)")
    p.add_argument("--build", default=os.environ.get("EPLOAD_BUILD_DIR",
                                                     os.path.join(SOURCE_DIR, "build")),
                   help="epload build directory; the package is <build>/python "
                        "(default: $EPLOAD_BUILD_DIR, else <source>/build)")
    p.add_argument("--no-stevedore", action="store_true",
                   help="leave stevedore out even if installed")
    p.add_argument("--strace", choices=("auto", "on", "off"), default="auto",
                   help="system-call counts at the largest size (auto: if installed, not --quick)")
    p.add_argument("--hyperfine", choices=("auto", "on", "off"), default="auto",
                   help="hyperfine -N pass at the largest size (auto: if installed, not --quick)")
    p.add_argument("--json-out", metavar="FILE", help="write all results as JSON")
    p.add_argument("--md-out", metavar="FILE", help="also write the Markdown report to FILE")
    p.add_argument("--plot", metavar="PNG", help="plot marginal cost against backends")
    p.add_argument("--env-dir", metavar="DIR",
                   help="generate the environments into DIR and keep them there; a later run "
                        "with the same sizes reuses them (default: a temporary directory, "
                        "removed at the end)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--break-variant", metavar="NAME", choices=list(VARIANTS),
                   help="TEST ONLY: sabotage one variant (its backends find no host, or its "
                        "lookup asks for another group) to show the verification stops the run")
    args = p.parse_args(argv)
    if args.runs is None:
        args.runs = 5 if args.quick else 15
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2
    args.sizes = parse_sizes(p, args.sizes, 1, "at least 1 backend")
    if args.noise < 0:
        p.error("--noise must be >= 0")
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    if not os.access(args.python, os.X_OK):
        p.error(f"interpreter not found: {args.python}")
    args.build = os.path.abspath(args.build)
    if args.env_dir:
        args.env_dir = os.path.abspath(args.env_dir)
    args.package_dir = os.path.join(args.build, "python")
    fdir = os.path.join(args.build, "bench")
    args.floor_dir = fdir if os.path.isdir(fdir) and any(
        n.startswith("_epload_floor.") for n in os.listdir(fdir)) else None
    pkg = os.path.join(args.package_dir, "epload")
    if not os.path.isfile(os.path.join(pkg, "__init__.py")) or \
            not any(n.startswith("_native") for n in os.listdir(pkg)):
        p.error(f"no built epload package in {args.package_dir}: build first "
                f"(cmake --build {args.build}) or pass --build DIR")
    for tool in ("strace", "hyperfine"):
        mode = getattr(args, tool)
        if mode == "on" and not shutil.which(tool):
            p.error(f"--{tool} on: {tool} is not installed (apt-get install {tool})")
        setattr(args, tool, mode == "on" or (mode == "auto" and not args.quick
                                             and shutil.which(tool) is not None))
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error(f"--plot needs matplotlib in {sys.executable} "
                    "(apt-get install python3-matplotlib; run with /usr/bin/python3)")
    return args


def main(argv=None):
    return harness_main("bench_startup.py", parse_args, run, argv)


def run(args, tmp):
    """Every size, then the stat baseline and the targets; writes the report."""
    stevedore_dir = None
    if not args.no_stevedore:
        stevedore_dir = stevedore_location(args.python, clean_env(tmp))
    hostdir = os.path.join(tmp, "host")
    write_host(hostdir)
    result = {"config": {
        "sizes": args.sizes, "noise": args.noise, "group": GROUP,
        "import_cost_ms": args.import_cost_ms, "runs": args.runs, "warmup": args.warmup,
        "python": args.python, "package_dir": args.package_dir,
        "stevedore": stevedore_dir, "machine": machine(),
        "load_average_before": os.getloadavg(), "started": time.strftime(
            "%Y-%m-%d %H:%M:%S %Z")}, "sizes": []}
    if args.break_variant:
        result["config"]["broken_variant"] = args.break_variant
    for n in args.sizes:
        result["sizes"].append(measure_size(args, n, tmp, hostdir, stevedore_dir))
    sb = stat_cost(args, tmp) if "floor-native" in result["sizes"][-1]["stats"] else None
    if sb:
        result["stat_baseline"] = sb
    result["targets"] = judge(result["sizes"], sb)
    result["config"]["load_average_after"] = os.getloadavg()
    write_report(result, markdown(result), args.md_out, args.json_out, args.plot, plot)
    return 0


def environment(args, n, work):
    """The generated environment of n backends: kept in --env-dir (and reused
    from there), else generated into work.  Returns its manifest."""
    extra = ("--import-cost-ms", args.import_cost_ms)
    if not args.env_dir:
        log(f"bench_startup: generating {n:,} Python backends among {args.noise:,} "
            "distributions ...")
        return generate(args.python, os.path.join(work, "env"), n, args.noise, GROUP,
                        kind="python", extra=extra)
    where = os.path.join(args.env_dir, f"python-{n}-{args.noise}"
                         + (f"-cost{args.import_cost_ms:g}" if args.import_cost_ms else ""))
    log(f"bench_startup: {n:,} Python backends among {args.noise:,} distributions "
        f"in {where} ...")
    manifest, reused = ensure_env(args.python, where, n, args.noise, GROUP, kind="python",
                                  extra=extra)
    if reused:
        log("bench_startup:   (reusing the environment generated earlier)")
    return manifest


def measure_size(args, n, tmp, hostdir, stevedore_dir):
    """One size: generate, verify every variant, time them interleaved, and
    at the largest size count system calls and run hyperfine."""
    work = os.path.join(tmp, f"size-{n}")
    size = Size(args, environment(args, n, work), hostdir, stevedore_dir, work)
    log(f"bench_startup: {n:,} backends: warming caches, verifying "
        f"{len(size.variants)} variants ...")
    verified = size.warm_and_verify()
    log(f"bench_startup: {n:,} backends: {len(size.variants)} variants x "
        f"{args.warmup + args.runs} interleaved rounds ...")
    raw = interleaved(size.commands, size.env, args.runs, args.warmup, work,
                      progress=progress_line)
    stats, ratios = analyse(raw)
    row = {"backends": n, "distributions": n + args.noise, "stats": stats,
           "ratios": ratios, "verified": verified, "commands": size.commands,
           "first_device": size.first_device}
    largest = n == args.sizes[-1]
    if largest and args.strace:
        log("bench_startup: counting system calls ...")
        row["strace"] = {v: strace_counts(c, size.env, work) for v, c in size.commands.items()}
    if largest and args.hyperfine:
        log("bench_startup: hyperfine pass ...")
        row["hyperfine"] = hyperfine_pass(size.commands, size.env, args.runs, args.warmup, work)
    return row


def stat_cost(args, tmp):
    """The bare cost of `full`'s stat calls at the largest size (epload_bench's
    BM_CacheStatBaseline), or None when epload_bench is not built."""
    bench_exe = os.path.join(args.build, "bench", "epload_bench")
    if not os.access(bench_exe, os.X_OK):
        return None
    log("bench_startup: the bare cost of the stat calls (epload_bench) ...")
    from bench_index import stat_baseline  # the same measurement as bench_index.py's
    distributions = args.sizes[-1] + args.noise
    b = stat_baseline(bench_exe, distributions, clean_env(tmp), tmp, args.quick,
                      which="StatBaseline")["StatBaseline"]
    return {"cpu_ms": b["cpu_ms"], "real_ms": b["real_ms"], "stats": b.get("stats", 0),
            "cpus": os.cpu_count() or 1, "distributions": distributions}


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Process-level benchmark of entry-point discovery: epload against
importlib.metadata (and stevedore's cache) on a generated environment.

One run does everything, with every command interleaved round by round (so
slow drift of the machine — other load, frequency, caches — hits every
command alike and the ratios stay honest):

  true        /bin/true: the floor of starting any process from the harness
  bare        python3 -I -S -c "<put SITE on sys.path>"
  importlib   the same + importlib.metadata.entry_points(group=GROUP)
  importlib-same  the same + printing what `epload entry-points` prints
              (name, value, dist name and version: importlib reads each
              distribution's METADATA for the last two)
  stevedore   the same + stevedore's cached lookup (_cache.get_group_all,
              what stevedore.ExtensionManager uses), cache warmed first;
              "not installed" when python3-stevedore is absent
  floor-exe   bench/epload_floor: a program linked like epload (the same
              shared libraries and options) that exits at once: the floor
              under any epload process, which no code of ours can lower
  floor-full  bench/epload_floor --stat LIST: the same program making exactly
              the stat calls `full` validation makes (the search paths and
              every watched file, read from the warmed cache), on two CPUs as
              epload does, and nothing else: the floor under `full`
  epload-exe  epload --version: the cost of starting the epload process
  cold        epload entry-points ... --no-cache          (full scan)
  full        epload entry-points ... (cache warmed, --validate full)
  paths       epload entry-points ... (cache warmed, --validate paths)

The interpreter runs with -I -S: no user or system site-packages, so the
search path is the interpreter's own (stdlib) entries with SITE inserted
first, in the -c code itself.  bare and importlib differ only by the lookup.
epload gets exactly that list as --path arguments, so both look at the same
directories in the same order.  Before timing, the answers are compared: the
(name, value, dist) triples epload prints must equal importlib's.

Reported per command: wall-time median and interquartile range over
--runs rounds (after --warmup rounds), and median CPU time (user+sys of the
child).  Derived: importlib's marginal cost (importlib - bare) divided by the
cost of each epload mode, for the whole epload process (what a caller pays)
and for its marginal cost over `epload --version`.  System calls per run come
from `strace -f -c`.  A second, scaling run times the epload modes at 100,
1,000 and 10,000 distributions (the issue's `paths` target: grows < 3x).

Each target's budget (importlib's marginal cost divided by the target ratio)
is set beside its floor measured in the same rounds: floor-exe for the cold
scan and `paths`, floor-full for `full`.  A budget below its floor says the
target cannot be reached on this machine, whatever epload does.

If hyperfine is installed, a confirmation pass runs the main commands under
`hyperfine -N --export-json` (not interleaved; reported alongside).

Output: a Markdown report on stdout (written by scripts/index_report.py),
everything as JSON with --json-out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Shared with the other harnesses; BenchError, generate and interleaved are
# re-exported (scripts/bench_gate uses them through this module).
from harness_common import (  # noqa: E402
    SOURCE_DIR, BenchError, capture, clean_env, gbench_min_time, generate, hyperfine_pass,
    importlib_same_output, harness_main, interleaved, interpreter_path, log, machine, norm,
    stevedore_location, strace_counts, summarize_rounds, write_report)
from index_report import markdown  # noqa: E402

# The targets (ratios of importlib's marginal cost to epload's cost).
TARGETS = {"cold": 8.0, "full": 30.0, "paths": 200.0}
SCALING_TARGET = 3.0


class Setup:
    """The commands for one generated environment."""

    def __init__(self, args, site, tmp, env, stevedore_dir):
        self.site = site
        self.group = args.group
        self.cache_dir = os.path.join(tmp, "epload-cache")
        os.makedirs(self.cache_dir, mode=0o700, exist_ok=True)
        self.search = [site] + interpreter_path(args.python, env)
        prefix = f"import sys; sys.path.insert(0, {site!r})"
        py = [args.python, "-I", "-S", "-c"]
        self.py = {
            "bare": py + [prefix],
            "importlib": py + [prefix + "; from importlib.metadata import entry_points; "
                               f"eps = entry_points(group={self.group!r})"],
            "importlib-same": py + [prefix + "; " + importlib_same_output(self.group)],
        }
        if stevedore_dir:
            # stevedore is importable only from its own directory, which must
            # not be on sys.path during the lookup (stevedore keys its cache
            # on sys.path and would then scan it too).
            self.py["stevedore"] = py + [
                prefix + f"; sys.path.append({stevedore_dir!r}); import stevedore.extension; "
                f"sys.path.pop(); from stevedore import _cache; "
                f"eps = _cache.get_group_all({self.group!r})"]
        paths = [a for p in self.search for a in ("--path", p)]
        self.epload_exe = args.epload
        ep = [args.epload, "entry-points", *paths, "--group", self.group]
        self.floor = {"true": [shutil.which("true") or "/bin/true"]}
        if getattr(args, "floor_exe", None):
            self.floor["floor-exe"] = [args.floor_exe]
        self.epload = {
            "epload-exe": [args.epload, "--version"],
            "cold": ep + ["--no-cache"],
            "full": ep + ["--cache-dir", self.cache_dir, "--validate", "full"],
            "paths": ep + ["--cache-dir", self.cache_dir, "--validate", "paths"],
        }

    def stat_list(self, env, tmp):
        """Writes what `full` validation stats, as epload_floor --stat reads
        it: one DIR<TAB>REL line per search path (REL empty) and per watched
        file, from the warmed cache file (its head's search paths and its
        watch_digest section; format in src/cache.cpp).  Returns the file's
        path and the number of lines."""
        paths = [a for p in self.search for a in ("--path", p)]
        where = capture([self.epload_exe, "index", "path", *paths, "--cache-dir",
                         self.cache_dir], env).stdout.strip()
        with open(where, "rb") as f:
            lines = f.read().split(b"\n")
        head = json.loads(lines[0])

        def raw(s):  # a byte string as the cache writes it
            return bytes.fromhex(s["hex"]) if isinstance(s, dict) else s.encode()
        dirs = [raw(p["path"]) for p in head["search_paths"]]
        sec = next((x for x in head["sections"] if x[0] == "watch_digest"), None)
        if sec is None:
            raise BenchError(f"{where}: no watch_digest section to take the watched files from")
        files = json.loads(lines[0 + 1 + head["sections"].index(sec)])["files"]
        rows = [d + b"\t" for d in dirs]
        rows += [dirs[g[0]] + b"\t" + raw(r) for g in files for r in g[1:]]
        if any(b"\n" in r for r in rows):
            raise BenchError("a watched path holds a newline: epload_floor --stat cannot list it")
        out = os.path.join(tmp, "floor-stat-list.txt")
        with open(out, "wb") as f:
            f.write(b"\n".join(rows) + b"\n")
        return out, len(rows)

    def check_answers(self, python, env, expected_backends):
        """Refuses to time a comparison whose answers differ."""
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
                "from importlib.metadata import entry_points; "
                "print(json.dumps([[e.name, e.value, e.dist.name] "
                "for e in entry_points(group=sys.argv[2])]))")
        want = json.loads(capture([python, "-I", "-S", "-c", code, self.site, self.group],
                                  env).stdout)
        if len(want) != expected_backends:
            raise BenchError(f"importlib found {len(want)} backends, expected {expected_backends}")
        for mode in ("cold", "full", "paths"):
            got = json.loads(capture(self.epload[mode] + ["--json"], env).stdout)
            got = [[e["name"], e["value"], e["dist"]] for e in got]
            if [g[:2] for g in got] != [w[:2] for w in want] or \
                    [norm(g[2]) for g in got] != [norm(w[2]) for w in want]:
                raise BenchError(f"epload ({mode}) and importlib disagree on {self.site}: "
                                 f"{len(got)} vs {len(want)} entry points")
        # The same-output command prints what epload prints (dist names
        # compared normalized).
        def lines(text):
            out = []
            for line in text.splitlines():
                head, _, tail = line.rpartition("  [")
                dist, _, version = tail.rstrip("]").rpartition(" ")
                out.append((head, norm(dist), version))
            return out
        same = capture(self.py["importlib-same"], env).stdout
        ours = capture(self.epload["full"], env).stdout
        if lines(same) != lines(ours):
            raise BenchError("importlib (same output) and `epload entry-points` print different "
                             f"lines: {len(same.splitlines())} vs {len(ours.splitlines())}")

    def warm(self, env):
        """Writes the caches, then waits until both validation levels hit
        (a cache written in the same clock tick as a change is not trusted
        at first — the racy rule — so retry a few times)."""
        for mode in ("full", "paths"):
            for _ in range(50):
                proc = capture(self.epload[mode] + ["--verbose"], env)
                if "cache hit" in proc.stderr:
                    break
                time.sleep(0.02)
            else:
                raise BenchError(f"epload cache never hit ({mode}): {proc.stderr.strip()}")
        if "stevedore" in self.py:
            capture(self.py["stevedore"], env)


# ------------------------------------------------------------- analysis ---

def analyse(raw):
    stats = summarize_rounds(raw)
    med = {n: s["median_ms"] for n, s in stats.items()}
    cpu = {n: s["cpu_median_ms"] for n, s in stats.items()}
    derived = {}
    if "importlib" in med:
        derived["importlib_marginal_ms"] = med["importlib"] - med["bare"]
        derived["importlib_marginal_cpu_ms"] = cpu["importlib"] - cpu["bare"]
    if "importlib-same" in med:
        derived["importlib_same_marginal_ms"] = med["importlib-same"] - med["bare"]
    if "stevedore" in med:
        derived["stevedore_marginal_ms"] = med["stevedore"] - med["bare"]
    ratios = {}
    if "importlib" in med:
        imp = derived["importlib_marginal_ms"]
        bare = raw["bare"]["wall"]
        for mode in ("cold", "full", "paths"):
            whole = med[mode]
            marginal = med[mode] - med["epload-exe"]
            # Paired per-round ratios: round i's importlib marginal over round
            # i's epload time; their spread shows how stable the ratio is.
            paired = sorted((i - b) / e for i, b, e in
                            zip(raw["importlib"]["wall"], bare, raw[mode]["wall"]))
            ratios[mode] = {
                "epload_ms": whole,
                "epload_marginal_ms": marginal,
                "ratio": imp / whole,
                "ratio_vs_marginal": imp / marginal if marginal > 0 else None,
                # The same ratio in CPU time (user+sys of the child): less
                # sensitive to other load on the machine than wall time.
                "ratio_cpu": derived["importlib_marginal_cpu_ms"] / cpu[mode],
                "paired_ratio_median": statistics.median(paired),
                "paired_ratio_q1": statistics.quantiles(paired, n=4, method="inclusive")[0]
                if len(paired) > 1 else paired[0],
                "paired_ratio_q3": statistics.quantiles(paired, n=4, method="inclusive")[2]
                if len(paired) > 1 else paired[0],
                "target": TARGETS[mode],
                "met": imp / whole >= TARGETS[mode],
            }
            if "importlib-same" in med:
                same = derived["importlib_same_marginal_ms"] / whole
                ratios[mode]["ratio_same_output"] = same
                ratios[mode]["met_same_output"] = same >= TARGETS[mode]
            if "stevedore" in med:
                ratios[mode]["ratio_vs_stevedore"] = derived["stevedore_marginal_ms"] / whole
    return stats, derived, ratios


def stat_baseline(bench_exe, distributions, env, tmp, quick,
                  which="StatBaseline|ValidateFull|LoadValidateFull|LoadValidatePaths"):
    """In-process figures from epload_bench at this environment's size: the
    bare cost of the stat calls `full` validation makes (BM_CacheStatBaseline:
    the same fstatat calls relative to a directory descriptor, nothing else),
    and epload's validate / load+validate.  epload_bench generates its own
    copy of the environment (same generator, same arguments, same content)."""
    out = os.path.join(tmp, "gbench.json")
    e = dict(env, EPLOAD_BENCH_SIZES=str(distributions))
    capture([bench_exe,
             f"--benchmark_filter=^BM_Cache({which})/",
             f"--benchmark_repetitions={3 if quick else 7}",
             "--benchmark_report_aggregates_only=true",
             gbench_min_time(bench_exe, 0.05 if quick else 0.2),
             f"--benchmark_out={out}", "--benchmark_out_format=json"], e)
    with open(out) as f:
        data = json.load(f)
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    res = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].split("/")[0].removeprefix("BM_Cache")
        res[name] = {"real_ms": b["real_time"] * scale[b["time_unit"]],
                     "cpu_ms": b["cpu_time"] * scale[b["time_unit"]]}
        if "stats" in b:
            res[name]["stats"] = int(b["stats"])
    return res


def floors(result):
    """Each target's budget in this run against the floor under it.

    budget = importlib's lookup marginal / the target ratio: the most a
    whole epload process may cost.  floor = floor-exe (linked like epload,
    exits at once) for the cold scan and `paths` (which stats the search
    paths only: a few calls), floor-full (the same program making exactly
    `full`'s stat calls on two CPUs) for `full`."""
    st, ratios = result["main"]["stats"], result["main"]["ratios"]
    if "floor-exe" not in st or not ratios:
        return None
    out = {}
    for mode, r in ratios.items():
        which = "floor-full" if mode == "full" else "floor-exe"
        if which not in st:
            continue
        f = {"budget_ms": r["epload_ms"] * r["ratio"] / r["target"], "floor": which,
             "floor_ms": st[which]["median_ms"], "epload_ms": r["epload_ms"]}
        f["reachable"] = f["budget_ms"] >= f["floor_ms"]
        out[mode] = f
    return out


# ----------------------------------------------------------------- main ---

def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_index.py", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", type=int, default=1000, help="backend distributions (1000)")
    p.add_argument("--noise", type=int, default=5000, help="ordinary distributions (5000)")
    p.add_argument("--group", default="torch.backends")
    p.add_argument("--runs", type=int, default=21, help="timed rounds (21)")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first (3)")
    p.add_argument("--quick", action="store_true",
                   help="5 rounds, 1 warm-up, no hyperfine pass, 5 rounds per scaling size")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter (/usr/bin/python3)")
    p.add_argument("--epload", default=os.path.join(SOURCE_DIR, "build", "epload"),
                   help="the epload executable (<source>/build/epload)")
    p.add_argument("--bench-exe", help="epload_bench, for the bare stat baseline "
                   "(default: bench/epload_bench beside --epload; skipped if absent)")
    p.add_argument("--floor-exe", help="epload_floor, the process floor (default: "
                   "bench/epload_floor beside --epload; skipped if absent)")
    p.add_argument("--scaling-sizes", default="100,1000,10000",
                   help="distribution counts of the scaling run ('' to skip)")
    p.add_argument("--scaling-runs", type=int, default=15)
    p.add_argument("--hyperfine", choices=("auto", "on", "off"), default="auto",
                   help="confirmation pass under hyperfine (auto: if installed)")
    p.add_argument("--no-strace", action="store_true", help="skip the system-call counts")
    p.add_argument("--json-out", metavar="FILE", help="write all results as JSON")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.warmup, args.scaling_runs = 5, 1, 5
        if args.hyperfine == "auto":
            args.hyperfine = "off"
    for opt in ("backends", "noise"):
        if getattr(args, opt) < 0:
            p.error(f"--{opt} must be >= 0")
    if args.runs < 1 or args.warmup < 0 or args.scaling_runs < 1:
        p.error("--runs and --scaling-runs must be >= 1, --warmup >= 0")
    if args.backends < 1:
        p.error("--backends must be >= 1 (the ratios need a lookup that finds something)")
    try:
        args.sizes = [int(s) for s in args.scaling_sizes.split(",") if s.strip()]
    except ValueError:
        p.error(f"--scaling-sizes must be comma-separated integers, got {args.scaling_sizes!r}")
    if any(n < 6 for n in args.sizes):
        p.error("--scaling-sizes: each size must be at least 6 (one backend in six)")
    args.epload = os.path.abspath(args.epload)
    if args.bench_exe is None:
        guess = os.path.join(os.path.dirname(args.epload), "bench", "epload_bench")
        args.bench_exe = guess if os.access(guess, os.X_OK) else None
    elif not os.access(args.bench_exe, os.X_OK):
        p.error(f"--bench-exe {args.bench_exe}: not an executable")
    if args.floor_exe is None:
        guess = os.path.join(os.path.dirname(args.epload), "bench", "epload_floor")
        args.floor_exe = guess if os.access(guess, os.X_OK) else None
    elif not os.access(args.floor_exe, os.X_OK):
        p.error(f"--floor-exe {args.floor_exe}: not an executable")
    if not os.access(args.epload, os.X_OK):
        p.error(f"epload executable not found at {args.epload}: build it first "
                "(see CONTRIBUTING.md) or pass --epload PATH")
    if not os.access(args.python, os.X_OK):
        p.error(f"interpreter not found: {args.python}")
    if args.hyperfine == "on" and not shutil.which("hyperfine"):
        p.error("--hyperfine on: hyperfine is not installed (apt-get install hyperfine)")
    if not args.no_strace and not shutil.which("strace"):
        p.error("strace is not installed (apt-get install strace), or pass --no-strace")
    return args


def main(argv=None):
    return harness_main("bench_index.py", parse_args, run, argv)


def run(args, tmp):
    """The main run, the stat baseline, the floors and the scaling run;
    writes the report."""
    env = clean_env(tmp)
    stevedore_dir = stevedore_location(args.python, env)
    result = {"config": {
        "backends": args.backends, "distributions": args.backends + args.noise,
        "group": args.group, "runs": args.runs, "warmup": args.warmup,
        "python": args.python, "epload": args.epload, "machine": machine(),
        "stevedore": stevedore_dir is not None,
        "load_average_before": os.getloadavg()}}
    measure_main(args, env, tmp, stevedore_dir, result)
    if args.bench_exe:
        log("bare stat baseline (epload_bench) ...")
        result["stat_baseline"] = stat_figures(args, env, tmp, result["main"]["stats"])
    result["floors"] = floors(result)
    if args.sizes:
        result["scaling"] = scaling(args, env, tmp)
    result["config"]["load_average_after"] = os.getloadavg()
    write_report(result, markdown(result), json_out=args.json_out)
    return 0


def measure_main(args, env, tmp, stevedore_dir, result):
    """Every command at --backends + --noise distributions, checked, warmed
    and timed interleaved; sets result["floor_stats"] (when epload_floor is
    there) and result["main"]."""
    log(f"generating {args.backends + args.noise} distributions ...")
    manifest = generate(args.python, os.path.join(tmp, "env"), args.backends, args.noise,
                        args.group)
    s = Setup(args, manifest["search_path"], tmp, env, stevedore_dir)
    s.check_answers(args.python, env, args.backends)
    s.warm(env)
    commands = {**s.floor, **s.py, **s.epload}
    if "floor-exe" in s.floor:
        listed, result["floor_stats"] = s.stat_list(env, tmp)
        commands["floor-full"] = s.floor["floor-exe"] + ["--stat", listed]
    log(f"timing {len(commands)} commands x {args.runs} rounds ...")
    raw = interleaved(commands, env, args.runs, args.warmup, tmp)
    stats, derived, ratios = analyse(raw)
    main_res = {"commands": commands, "stats": stats, "derived": derived, "ratios": ratios,
                "search_path": s.search}
    if not args.no_strace:
        log("counting system calls ...")
        main_res["strace"] = {n: strace_counts(c, env, tmp) for n, c in commands.items()}
    use_hf = args.hyperfine == "on" or (args.hyperfine == "auto" and shutil.which("hyperfine"))
    if use_hf:
        log("hyperfine confirmation pass ...")
        main_res["hyperfine"] = hyperfine_pass(commands, env, args.runs, args.warmup, tmp)
    result["main"] = main_res


def stat_figures(args, env, tmp, stats):
    """epload_bench's figures at this size, and the whole `full` process and
    the in-process ones over the bare stat cost."""
    sb = stat_baseline(args.bench_exe, args.backends + args.noise, env, tmp, args.quick)
    bare = sb["StatBaseline"]
    sb["full_process_over_bare_stats"] = stats["full"]["median_ms"] / bare["real_ms"]
    sb["full_inprocess_over_bare_stats"] = sb["LoadValidateFull"]["real_ms"] / bare["real_ms"]
    sb["validate_over_bare_stats"] = sb["ValidateFull"]["real_ms"] / bare["real_ms"]
    sb["target"] = 1.5
    return sb


def scaling(args, env, tmp):
    """The epload modes at each --scaling-sizes count (one distribution in six
    a backend), and how `paths` grows from the first to the last."""
    rows = []
    for n in args.sizes:
        log(f"scaling: {n} distributions ...")
        b = max(1, n // 6)
        d = os.path.join(tmp, f"scale-{n}")
        man = generate(args.python, d, b, n - b, args.group)
        ss = Setup(args, man["search_path"], os.path.join(d, "work"), env, None)
        ss.check_answers(args.python, env, b)
        ss.warm(env)
        raw_n = interleaved({**ss.floor, **ss.epload}, env, args.scaling_runs, args.warmup, tmp)
        st, _, _ = analyse(raw_n)
        rows.append({"distributions": n, "backends": b, "stats": st})
        shutil.rmtree(d, ignore_errors=True)
    first, last = rows[0]["stats"], rows[-1]["stats"]
    m0 = first["paths"]["median_ms"] - first["epload-exe"]["median_ms"]
    m1 = last["paths"]["median_ms"] - last["epload-exe"]["median_ms"]
    growth = {
        "whole": last["paths"]["median_ms"] / first["paths"]["median_ms"],
        # A marginal within noise of zero has no meaningful ratio.
        "marginal": m1 / m0 if m0 > 0.05 else None,
        "cpu": last["paths"]["cpu_median_ms"] / first["paths"]["cpu_median_ms"],
    }
    return {"runs": args.scaling_runs, "sizes": rows, "paths_growth": growth,
            "target": SCALING_TARGET}


if __name__ == "__main__":
    sys.exit(main())

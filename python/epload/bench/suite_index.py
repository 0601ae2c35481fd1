"""Process-level benchmark of entry-point discovery: epload against
importlib.metadata, interleaved round by round, answers checked equal:
{listing}
Method: BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from . import options
from .envs import (clean_env, config, interpreter_path, kept_env, norm, stevedore_location,
                   stevedore_lookup)
from .proc import BenchError, capture, extra_passes, interleaved, log, remove_tree
from .report import (SYSCALL_COLUMNS, TIMES, fmt_ms, load_average, syscall_cells, table,
                     times, write_report)
from .stats import quartiles, summarize_rounds
from .targets import REACH, budget_floor, stat_baseline

PROG = "bench_index.py"
# The commands, in report order: name -> label.
COMMANDS = {
    "true": "process floor `/bin/true`",
    "bare": "bare `python3 -I -S`",
    "importlib": "importlib.metadata `entry_points(group=)`",
    "importlib-same": "importlib.metadata, same output as epload (name, value, dist, version)",
    "stevedore": "stevedore cached `get_group_all`",
    "floor-exe": "floor: linked like epload, exits at once (`bench/epload_floor`)",
    "floor-full": "floor under `full`: its stat calls alone (`bench/epload_floor --stat`)",
    "epload-exe": "`epload --version`",
    "cold": "epload `--no-cache` (cold scan)",
    "full": "epload cached, `--validate full`",
    "paths": "epload cached, `--validate paths`",
}
# The targets: importlib's marginal cost ÷ each epload mode's whole process,
# and the floor each is set beside.
TARGETS = {"cold": 8.0, "full": 30.0, "paths": 200.0}
FLOOR_OF = {"cold": "floor-exe", "full": "floor-full", "paths": "floor-exe"}
SCALING_TARGET = 3.0     # `paths` grows < 3x from the smallest to the largest size
STAT_TARGET = 1.5        # a cached `full` process ≤ 1.5x its bare stat calls
STAT_CASES = (("ValidateFull", "epload validate `full` only (BM_CacheValidateFull)"),
              ("LoadValidateFull", "epload load + validate `full` (BM_CacheLoadValidateFull)"),
              ("LoadValidatePaths", "epload load + validate `paths` (BM_CacheLoadValidatePaths)"))
# What `epload entry-points --group G` prints, done with importlib.metadata
# (dist name and version read from each distribution's METADATA).
SAME_OUTPUT = ("from importlib.metadata import entry_points; w = sys.stdout.write\n"
               "for e in entry_points(group={g!r}): "
               "w(f'{{e.group}} {{e.name}} = {{e.value}}  "
               "[{{e.dist.name}} {{e.dist.version}}]\\n')")


class Setup:
    """The lookup commands for one generated environment ``site``."""

    def __init__(self, args, site, tmp, env, stevedore_dir, site_first=True, cache_dir=None):
        self.site, self.group, self.site_first = site, args.group, site_first
        self.cache_dir = cache_dir or os.path.join(tmp, "epload-cache")
        os.makedirs(self.cache_dir, mode=0o700, exist_ok=True)
        own = interpreter_path(args.python, env)
        self.search = [site] + own if site_first else own + [site]
        prefix = (f"import sys; sys.path.insert(0, {site!r}); " if site_first
                  else f"import sys; sys.path.append({site!r}); ")
        py = [args.python, "-I", "-S", "-c"]
        self.py = {"bare": py + [prefix.rstrip("; ")],
                   "importlib": py + [prefix + "from importlib.metadata import entry_points; "
                                      f"eps = entry_points(group={self.group!r})"],
                   "importlib-same": py + [prefix + SAME_OUTPUT.format(g=self.group)]}
        if stevedore_dir:
            self.py["stevedore"] = py + [prefix + stevedore_lookup(stevedore_dir, self.group)]
        self.epload_exe = args.epload
        self.paths = [a for p in self.search for a in ("--path", p)]
        ep = [args.epload, "entry-points", *self.paths, "--group", self.group]
        cached = ep + ["--cache-dir", self.cache_dir, "--validate"]
        self.floor = {"true": [shutil.which("true") or "/bin/true"]} | (
            {"floor-exe": [args.floor_exe]} if getattr(args, "floor_exe", None) else {})
        self.epload = {"epload-exe": [args.epload, "--version"], "cold": ep + ["--no-cache"],
                       "full": cached + ["full"], "paths": cached + ["paths"]}

    def stat_list(self, env, tmp):
        """(path, lines): what `full` stats, as epload_floor --stat reads it."""
        where = capture([self.epload_exe, "index", "path", *self.paths, "--cache-dir",
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
        files = json.loads(lines[1 + head["sections"].index(sec)])["files"]
        rows = [d + b"\t" for d in dirs] + [dirs[g[0]] + b"\t" + raw(r)
                                            for g in files for r in g[1:]]
        if any(b"\n" in r for r in rows):
            raise BenchError("a watched path holds a newline: epload_floor --stat cannot list it")
        out = os.path.join(tmp, "floor-stat-list.txt")
        with open(out, "wb") as f:
            f.write(b"\n".join(rows) + b"\n")
        return out, len(rows)

    def check_answers(self, python, env, expected):
        """Refuses to time a comparison whose answers differ from importlib.metadata's."""
        code = ("; import json; from importlib.metadata import entry_points; print(json.dumps("
                f"[[e.name, e.value, e.dist.name] for e in entry_points(group={self.group!r})]))")
        want = [[n, v, norm(d)] for n, v, d in json.loads(capture(
            self.py["bare"][:-1] + [self.py["bare"][-1] + code], env).stdout)]
        if len(want) != expected:
            raise BenchError(f"importlib.metadata found {len(want)} {self.group} entry points in "
                             f"{self.site}, expected {expected}")
        for m in ("cold", "full", "paths"):
            got = [[e["name"], e["value"], norm(e["dist"])]
                   for e in json.loads(capture(self.epload[m] + ["--json"], env).stdout)]
            if got != want:
                raise BenchError(f"epload ({m}) and importlib.metadata disagree on {self.site}: "
                                 f"{len(got)} against {len(want)} entry points")

        def lines(text):  # (head, dist normalized, version) per printed line
            split = [(line.rpartition("  [")[0], line.rpartition("  [")[2].rstrip("]"))
                     for line in text.splitlines()]
            return [(head, norm(tail.rpartition(" ")[0]), tail.rpartition(" ")[2])
                    for head, tail in split]
        same = capture(self.py["importlib-same"], env).stdout
        ours = capture(self.epload["full"], env).stdout
        if lines(same) != lines(ours):
            raise BenchError("importlib (same output) and `epload entry-points` print different "
                             f"lines: {len(same.splitlines())} vs {len(ours.splitlines())}")

    def warm(self, env, more=None):
        """Runs each cached command until a cache hit (the racy rule)."""
        for label, argv in dict({f"epload ({m})": self.epload[m] for m in ("full", "paths")},
                                **(more or {})).items():
            for _ in range(50):
                proc = capture(argv + ["--verbose"], env)
                if "cache hit" in proc.stderr:
                    break
                time.sleep(0.02)
            else:
                raise BenchError(f"{label}: the cache never hit:\n{proc.stderr.strip()}")
        if "stevedore" in self.py:
            capture(self.py["stevedore"], env)


def analyse(raw):
    """(summaries, importlib's marginal costs, each epload mode's ratios)."""
    stats = summarize_rounds(raw)
    med = {n: s["median_ms"] for n, s in stats.items()}
    cpu = {n: s["cpu_median_ms"] for n, s in stats.items()}
    derived = {f"{ref.replace('-same', '_same')}_marginal_ms": med[ref] - med["bare"]
               for ref in ("importlib", "importlib-same", "stevedore") if ref in med}
    ratios = {}
    if "importlib" not in med:
        return stats, derived, ratios
    imp = derived["importlib_marginal_ms"]
    derived["importlib_marginal_cpu_ms"] = cpu["importlib"] - cpu["bare"]
    for mode, target in TARGETS.items():
        whole, marginal = med[mode], med[mode] - med["epload-exe"]
        # Paired per-round ratios: round i's importlib marginal over round i's
        # epload time; their spread shows how stable the ratio is.
        q1, pm, q3 = quartiles(sorted((i - b) / e for i, b, e in zip(
            raw["importlib"]["wall"], raw["bare"]["wall"], raw[mode]["wall"])))
        r = ratios[mode] = {
            "epload_ms": whole, "epload_marginal_ms": marginal, "ratio": imp / whole,
            "ratio_vs_marginal": imp / marginal if marginal > 0 else None,
            # CPU time (user+sys of the child): less sensitive to other load.
            "ratio_cpu": derived["importlib_marginal_cpu_ms"] / cpu[mode],
            "paired_ratio_median": pm, "paired_ratio_q1": q1, "paired_ratio_q3": q3,
            "target": target, "met": imp / whole >= target}
        if "importlib_same_marginal_ms" in derived:
            r["ratio_same_output"] = derived["importlib_same_marginal_ms"] / whole
            r["met_same_output"] = r["ratio_same_output"] >= target
        if "stevedore_marginal_ms" in derived:
            r["ratio_vs_stevedore"] = derived["stevedore_marginal_ms"] / whole
    return stats, derived, ratios


def floors(result):
    """Each target's budget against the floor under it (FLOOR_OF)."""
    st, ratios = result["main"]["stats"], result["main"]["ratios"]
    if "floor-exe" not in st or not ratios:
        return None
    return {mode: budget_floor({"floor": FLOOR_OF[mode], "epload_ms": r["epload_ms"]},
                               r["epload_ms"] * r["ratio"] / r["target"],
                               st[FLOOR_OF[mode]]["median_ms"])
            for mode, r in ratios.items() if FLOOR_OF[mode] in st}


def markdown(result):
    L = commands_table(result) + ratios_table(result["main"])
    L += stat_baseline_table(result["main"], result["stat_baseline"]) \
        if result.get("stat_baseline") else []
    L += floors_table(result) if result.get("floors") else []
    return "\n".join(L + (scaling_table(result["scaling"]) if result.get("scaling") else [])) + "\n"


def commands_table(result):
    """Every command's times, system calls and hyperfine median."""
    m, cfg = result["main"], result["config"]
    hf = m.get("hyperfine")
    rows = []
    for n in COMMANDS:
        if n in m["stats"]:
            rows.append([COMMANDS[n]] + times(m["stats"][n]) + syscall_cells(
                m.get("strace", {}).get(n), None if hf is None else hf.get(n, {})))
        elif n == "stevedore":
            rows.append(["stevedore (cached)", "not installed"] + [""] * (6 + bool(hf)))
    return [f"### Entry-point lookup, {cfg['distributions']:,} distributions "
            f"({cfg['backends']:,} with `{cfg['group']}`), {cfg['rounds']} interleaved rounds\n",
            f"{cfg['machine']['cpus']} CPUs; {load_average(cfg)}.\n"] + table(
        ["command", *TIMES, *SYSCALL_COLUMNS] + (["hyperfine median ms"] if hf else []),
        "l" + "r" * (7 + bool(hf)), rows)


def ratios_table(m):
    """importlib's marginal cost over each epload mode, against the targets."""
    d = m["derived"]
    rows = []
    for mode, r in m["ratios"].items():
        met = ("yes" if r["met"] else f"**NO** ({r['ratio']:.1f}× of {r['target']:.0f}×)") + (
            "" if "met_same_output" not in r else "; yes" if r["met_same_output"] else "; **NO**")
        rows.append([COMMANDS[mode], fmt_ms(r["epload_ms"]), f"**{r['ratio']:.1f}×**",
                     f"{r['paired_ratio_q1']:.1f}–{r['paired_ratio_q3']:.1f}×",
                     f"{r['ratio_cpu']:.1f}×",
                     f"{r['ratio_vs_marginal']:.0f}×" if r["ratio_vs_marginal"] else "n/a",
                     f"**{r['ratio_same_output']:.1f}×**" if "ratio_same_output" in r else "n/a",
                     f"≥ {r['target']:.0f}×", met])
    return ["", f"importlib.metadata marginal cost (importlib − bare): "
                f"**{fmt_ms(d['importlib_marginal_ms'])} ms** for the lookup alone"
                + (f", **{fmt_ms(d['importlib_same_marginal_ms'])} ms** for the same output as "
                   "`epload entry-points`" if "importlib_same_marginal_ms" in d else "")
                + (f"; stevedore cached marginal: {fmt_ms(d['stevedore_marginal_ms'])} ms"
                   if "stevedore_marginal_ms" in d else "; stevedore: not installed") + ".\n"] \
        + table(["epload mode", "epload ms (whole process)", "importlib lookup marginal ÷ epload",
                 "paired-round IQR", "same in CPU time", "÷ epload marginal over `--version`",
                 "importlib same-output marginal ÷ epload", "target",
                 "met (lookup; same output)"], "lrrrrrrrl", rows)


def stat_baseline_table(m, sb):
    """Cached `full` validation against the bare cost of its stat calls."""
    bare, full = sb["StatBaseline"], m["stats"]["full"]
    rows = [["bare `fstatat` calls (BM_CacheStatBaseline)", fmt_ms(bare["real_ms"]),
             fmt_ms(bare["cpu_ms"]), "1.00"]]
    rows += [[what, fmt_ms(sb[k]["real_ms"]), fmt_ms(sb[k]["cpu_ms"]),
              f"{sb[k]['real_ms'] / bare['real_ms']:.2f}"] for k, what in STAT_CASES]
    rows.append(["whole process `epload entry-points` cached `full` (above)",
                 fmt_ms(full["median_ms"]), fmt_ms(full["cpu_median_ms"]),
                 f"{sb['full_process_over_bare_stats']:.2f}"])
    ok = sb["full_process_over_bare_stats"] <= sb["target"]
    return ["", f"### Cached `full` validation against the bare cost of its {bare['stats']:,} "
                "stat calls (epload_bench, medians)\n"] \
        + table(["figure", "wall ms", "CPU ms", "÷ bare stats"], "lrrr", rows) \
        + ["", f"Target ≤ {sb['target']}× the bare stat cost: whole process "
               f"{'met' if ok else '**NOT met**'} ({sb['full_process_over_bare_stats']:.2f}×); "
               f"in-process load+validate {sb['full_inprocess_over_bare_stats']:.2f}×."]


def floors_table(result):
    """Each target's budget in this run against the floor under it."""
    m, fl = result["main"], result["floors"]
    what = {"floor-exe": "`epload_floor`: linked like epload, exits at once",
            "floor-full": f"`epload_floor --stat`: the same {result.get('floor_stats', 0):,} "
                          "stat calls on two CPUs, nothing else"}
    rows = [[COMMANDS[mode], f"≥ {m['ratios'][mode]['target']:.0f}×", fmt_ms(f["budget_ms"]),
             what[f["floor"]], fmt_ms(f["floor_ms"]), fmt_ms(f["epload_ms"]),
             fmt_ms(f["epload_ms"] - f["floor_ms"]), REACH[f["reachable"]]]
            for mode, f in fl.items()]
    return ["", "### The targets' budgets against their floors (same rounds)\n"] + table(
        ["epload mode", "target", "budget: importlib lookup marginal ÷ target", "floor",
         "floor ms", "epload ms", "epload − floor", "reachable here"], "lrrlrrrl", rows)


def scaling_table(sc):
    """The scaling run: the epload modes at each size, and `paths`' growth."""
    rows = []
    for row in sc["sizes"]:
        s = row["stats"]
        rows.append([f"{row['distributions']:,}"] + [fmt_ms(s[n]["median_ms"]) for n in (
            "true", "epload-exe", "paths")] + [
            fmt_ms(s["paths"]["median_ms"] - s["epload-exe"]["median_ms"]),
            fmt_ms(s["paths"]["cpu_median_ms"]), fmt_ms(s["full"]["median_ms"]),
            fmt_ms(s["cold"]["median_ms"])])
    g, target = sc["paths_growth"], sc["target"]
    gm = ("n/a (the smallest marginal is within noise of zero)" if g["marginal"] is None
          else f"{g['marginal']:.2f}× ({'met' if g['marginal'] < target else '**not met**'})")
    return ["", f"### Scaling ({sc['rounds']} interleaved rounds per size; ms, median)\n"] + table(
        ["distributions", "/bin/true", "epload --version", "paths", "paths marginal",
         "paths CPU", "full", "cold"], "r" * 8, rows) + [
        "", f"`paths` growth {sc['sizes'][0]['distributions']:,} → "
            f"{sc['sizes'][-1]['distributions']:,}: whole process **{g['whole']:.2f}×** "
            f"(target < {target:.0f}×: {'met' if g['whole'] < target else '**NOT met**'}); "
            f"marginal over `epload --version`: {gm}; CPU time {g['cpu']:.2f}×."]


def parse_args(argv):
    p = options.parser(PROG, __doc__, COMMANDS)
    options.add_common(p, rounds=(21, 5), warmup=(3, 1), plot=False,
                       tools={"strace": True, "hyperfine": False})
    options.add_lookup(p)
    p.add_argument("--floor-exe", help="epload_floor, the process floor (default: "
                   "<build>/bench/epload_floor; skipped if absent)")
    p.add_argument("--scaling-sizes", default="100,1000,10000",
                   help="distribution counts of the scaling run ('' to skip)")
    options.add_count(p, "--scaling-rounds", (15, 5), "rounds per scaling size")
    args = options.finish(p, p.parse_args(argv), built=True)
    args.sizes = options.parse_sizes(p, args.scaling_sizes, 6) if args.scaling_sizes else []
    bench = os.path.join(args.build, "bench")
    args.bench_exe = options.executable(p, None, None, os.path.join(bench, "epload_bench"))
    args.floor_exe = options.executable(p, args.floor_exe, "--floor-exe",
                                        os.path.join(bench, "epload_floor"))
    return args


def run(args, tmp):
    """The main run, the stat baseline, the floors and the scaling run."""
    env = clean_env(tmp)
    stevedore_dir = stevedore_location(args.python, env)
    result = {"config": config(args, backends=args.backends, group=args.group,
                               distributions=args.backends + args.noise, epload=args.epload,
                               stevedore=stevedore_dir is not None)}
    measure_main(args, env, tmp, stevedore_dir, result)
    if args.bench_exe:
        log("bare stat baseline (epload_bench) ...")
        result["stat_baseline"] = stat_figures(args, env, tmp, result["main"]["stats"])
    result["floors"] = floors(result)
    if args.sizes:
        result["scaling"] = scaling(args, env, tmp)
    write_report(result, markdown, args.md_out, args.json_out)
    return 0


def measure_main(args, env, tmp, stevedore_dir, result):
    """Every command checked, warmed and timed: result["main"], ["floor_stats"]."""
    manifest = kept_env("bench_index", args.python, os.path.join(tmp, "env"), args.backends,
                        args.noise, args.group)
    s = Setup(args, manifest["search_path"], tmp, env, stevedore_dir)
    s.check_answers(args.python, env, args.backends)
    s.warm(env)
    commands = {**s.floor, **s.py, **s.epload}
    if "floor-exe" in s.floor:
        listed, result["floor_stats"] = s.stat_list(env, tmp)
        commands["floor-full"] = s.floor["floor-exe"] + ["--stat", listed]
    log(f"timing {len(commands)} commands x {args.rounds} rounds ...")
    raw = interleaved(commands, env, args.rounds, args.warmup, tmp)
    stats, derived, ratios = analyse(raw)
    result["main"] = {"commands": commands, "stats": stats, "derived": derived, "ratios": ratios,
                      "search_path": s.search, **extra_passes("bench_index", args, commands, env,
                                                              tmp)}


def stat_figures(args, env, tmp, stats):
    """epload_bench's figures, and `full` (process, in-process) over bare stats."""
    sb = stat_baseline(args.bench_exe, args.backends + args.noise, env, tmp, args.quick)
    bare = sb["StatBaseline"]["real_ms"]
    sb["full_process_over_bare_stats"] = stats["full"]["median_ms"] / bare
    sb["full_inprocess_over_bare_stats"] = sb["LoadValidateFull"]["real_ms"] / bare
    sb["validate_over_bare_stats"] = sb["ValidateFull"]["real_ms"] / bare
    sb["target"] = STAT_TARGET
    return sb


def scaling(args, env, tmp):
    """The epload modes at each --scaling-sizes count, and `paths`' growth."""
    rows = []
    for n in args.sizes:
        b, d = max(1, n // 6), os.path.join(tmp, f"scale-{n}")
        man = kept_env("bench_index: scaling", args.python, d, b, n - b, args.group)
        ss = Setup(args, man["search_path"], os.path.join(d, "work"), env, None)
        ss.check_answers(args.python, env, b)
        ss.warm(env)
        raw = interleaved({**ss.floor, **ss.epload}, env, args.scaling_rounds, args.warmup, tmp)
        rows.append({"distributions": n, "backends": b, "stats": analyse(raw)[0]})
        remove_tree(d)
    first, last = rows[0]["stats"], rows[-1]["stats"]
    m0 = first["paths"]["median_ms"] - first["epload-exe"]["median_ms"]
    m1 = last["paths"]["median_ms"] - last["epload-exe"]["median_ms"]
    growth = {"whole": last["paths"]["median_ms"] / first["paths"]["median_ms"],
              # A marginal within noise of zero has no meaningful ratio.
              "marginal": m1 / m0 if m0 > 0.05 else None,
              "cpu": last["paths"]["cpu_median_ms"] / first["paths"]["cpu_median_ms"]}
    return {"rounds": args.scaling_rounds, "sizes": rows, "paths_growth": growth,
            "target": SCALING_TARGET}

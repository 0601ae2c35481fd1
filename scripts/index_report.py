"""The Markdown report of scripts/bench_index.py: the commands' table, the
ratios against the issue's targets, the bare stat baseline, the targets'
budgets against their floors and the scaling run, from the result that
bench_index.py also writes as JSON."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_common import fmt_ms  # noqa: E402

LABELS = {
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
# Report order of the commands.
ORDER = ["true", "bare", "importlib", "importlib-same", "stevedore", "floor-exe", "floor-full",
         "epload-exe", "cold", "full", "paths"]
MODES = ("cold", "full", "paths")


def markdown(result):
    """The whole report, one section after another."""
    L = commands_table(result) + ratios_table(result["main"])
    if result.get("stat_baseline"):
        L += stat_baseline_table(result["main"], result["stat_baseline"])
    if result.get("floors"):
        L += floors_table(result)
    if result.get("scaling"):
        L += scaling_table(result["scaling"])
    return "\n".join(L) + "\n"


def commands_table(result):
    """Every command's times, system calls and hyperfine median."""
    m, cfg = result["main"], result["config"]
    L = [f"### Entry-point lookup, {cfg['distributions']:,} distributions "
         f"({cfg['backends']:,} with `{cfg['group']}`), {cfg['runs']} interleaved rounds\n"]
    la, lb = cfg.get("load_average_before"), cfg.get("load_average_after")
    if la and lb:
        L.append(f"{cfg['machine']['cpus']} CPUs; 1-minute load average {la[0]:.2f} before, "
                 f"{lb[0]:.2f} after.\n")
    L.append("| command | median ms | IQR ms | CPU ms | syscalls | stat | openat | getdents64 |"
             + (" hyperfine median ms |" if m.get("hyperfine") else ""))
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if m.get("hyperfine") else ""))
    for n in ORDER:
        if n not in m["stats"]:
            if n == "stevedore":
                L.append("| stevedore (cached) | not installed | | | | | | |"
                         + (" |" if m.get("hyperfine") else ""))
            continue
        s = m["stats"][n]
        sc = m.get("strace", {}).get(n)
        sys_cols = (f"{sc['total']:,} | {sc['stat']:,} | {sc['openat']:,} | {sc['getdents64']:,}"
                    if sc else "| | |")
        hf = ""
        if m.get("hyperfine"):
            h = m["hyperfine"].get(n)
            hf = f" {fmt_ms(h['median_ms'])} |" if h else " |"
        L.append(f"| {LABELS[n]} | {fmt_ms(s['median_ms'])} | {fmt_ms(s['q1_ms'])}–"
                 f"{fmt_ms(s['q3_ms'])} | {fmt_ms(s['cpu_median_ms'])} | {sys_cols} |{hf}")
    return L


def ratios_table(m):
    """importlib's marginal cost over each epload mode, against the targets."""
    d = m["derived"]
    L = ["", f"importlib.metadata marginal cost (importlib − bare): "
             f"**{fmt_ms(d['importlib_marginal_ms'])} ms** for the lookup alone"
             + (f", **{fmt_ms(d['importlib_same_marginal_ms'])} ms** for the same output as "
                "`epload entry-points`" if "importlib_same_marginal_ms" in d else "")
             + (f"; stevedore cached marginal: {fmt_ms(d['stevedore_marginal_ms'])} ms"
                if "stevedore_marginal_ms" in d else "; stevedore: not installed") + ".\n",
         "| epload mode | epload ms (whole process) | importlib lookup marginal ÷ epload | "
         "paired-round IQR | same in CPU time | ÷ epload marginal over `--version` | "
         "importlib same-output marginal ÷ epload | target | met (lookup; same output) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for mode in MODES:
        r = m["ratios"][mode]
        vm = f"{r['ratio_vs_marginal']:.0f}×" if r["ratio_vs_marginal"] else "n/a"
        met = "yes" if r["met"] else f"**NO** ({r['ratio']:.1f}× of {r['target']:.0f}×)"
        same = f"**{r['ratio_same_output']:.1f}×**" if "ratio_same_output" in r else "n/a"
        if "met_same_output" in r:
            met += "; " + ("yes" if r["met_same_output"] else "**NO**")
        L.append(f"| {LABELS[mode]} | {fmt_ms(r['epload_ms'])} | **{r['ratio']:.1f}×** | "
                 f"{r['paired_ratio_q1']:.1f}–{r['paired_ratio_q3']:.1f}× | {r['ratio_cpu']:.1f}× | {vm} | "
                 f"{same} | ≥ {r['target']:.0f}× | {met} |")
    return L


def stat_baseline_table(m, sb):
    """Cached `full` validation against the bare cost of its stat calls."""
    bare = sb["StatBaseline"]
    L = ["", f"### Cached `full` validation against the bare cost of its {bare['stats']:,} "
             "stat calls (epload_bench, medians)\n",
         "| figure | wall ms | CPU ms | ÷ bare stats |",
         "|---|---:|---:|---:|",
         f"| bare `fstatat` calls (BM_CacheStatBaseline) | {fmt_ms(bare['real_ms'])} | "
         f"{fmt_ms(bare['cpu_ms'])} | 1.00 |"]
    for key, label in (("ValidateFull", "epload validate `full` only (BM_CacheValidateFull)"),
                       ("LoadValidateFull", "epload load + validate `full` "
                        "(BM_CacheLoadValidateFull)"),
                       ("LoadValidatePaths", "epload load + validate `paths` "
                        "(BM_CacheLoadValidatePaths)")):
        r = sb[key]
        L.append(f"| {label} | {fmt_ms(r['real_ms'])} | {fmt_ms(r['cpu_ms'])} | "
                 f"{r['real_ms'] / bare['real_ms']:.2f} |")
    full = m["stats"]["full"]["median_ms"]
    ok = sb["full_process_over_bare_stats"] <= sb["target"]
    L.append(f"| whole process `epload entry-points` cached `full` (above) | {fmt_ms(full)} | "
             f"{fmt_ms(m['stats']['full']['cpu_median_ms'])} | "
             f"{sb['full_process_over_bare_stats']:.2f} |")
    L.append("")
    L.append(f"Target ≤ {sb['target']}× the bare stat cost: whole process "
             f"{'met' if ok else '**NOT met**'} ({sb['full_process_over_bare_stats']:.2f}×); "
             f"in-process load+validate {sb['full_inprocess_over_bare_stats']:.2f}×.")
    return L


def floors_table(result):
    """Each target's budget in this run against the floor under it."""
    m, fl = result["main"], result["floors"]
    L = ["", "### The targets' budgets against their floors (same rounds)\n",
         "| epload mode | target | budget: importlib lookup marginal ÷ target | floor | "
         "floor ms | epload ms | epload − floor | reachable here |",
         "|---|---:|---:|---|---:|---:|---:|---|"]
    what = {"floor-exe": "`epload_floor`: linked like epload, exits at once",
            "floor-full": f"`epload_floor --stat`: the same {result['floor_stats']:,} stat "
                          "calls on two CPUs, nothing else" if "floor_stats" in result
                          else ""}
    for mode in MODES:
        if mode not in fl:
            continue
        f = fl[mode]
        reach = "yes" if f["reachable"] else "**no**: the budget is below the floor"
        L.append(f"| {LABELS[mode]} | ≥ {m['ratios'][mode]['target']:.0f}× | "
                 f"{fmt_ms(f['budget_ms'])} | {what[f['floor']]} | {fmt_ms(f['floor_ms'])} | "
                 f"{fmt_ms(f['epload_ms'])} | {fmt_ms(f['epload_ms'] - f['floor_ms'])} | "
                 f"{reach} |")
    return L


def scaling_table(sc):
    """The scaling run: the epload modes at each size, and `paths`' growth."""
    L = ["", f"### Scaling ({sc['runs']} interleaved rounds per size; ms, median)\n",
         "| distributions | /bin/true | epload --version | paths | paths marginal | "
         "paths CPU | full | cold |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in sc["sizes"]:
        s = row["stats"]
        L.append(f"| {row['distributions']:,} | {fmt_ms(s['true']['median_ms'])} | "
                 f"{fmt_ms(s['epload-exe']['median_ms'])} | "
                 f"{fmt_ms(s['paths']['median_ms'])} | "
                 f"{fmt_ms(s['paths']['median_ms'] - s['epload-exe']['median_ms'])} | "
                 f"{fmt_ms(s['paths']['cpu_median_ms'])} | "
                 f"{fmt_ms(s['full']['median_ms'])} | {fmt_ms(s['cold']['median_ms'])} |")
    g, target = sc["paths_growth"], sc["target"]
    gm = ("n/a (the smallest marginal is within noise of zero)" if g["marginal"] is None
          else f"{g['marginal']:.2f}× ("
          f"{'met' if g['marginal'] < target else '**not met**'})")
    L.append("")
    L.append(f"`paths` growth {sc['sizes'][0]['distributions']:,} → "
             f"{sc['sizes'][-1]['distributions']:,}: whole process **{g['whole']:.2f}×** "
             f"(target < {target:.0f}×: "
             f"{'met' if g['whole'] < target else '**NOT met**'}); "
             f"marginal over `epload --version`: {gm}; CPU time {g['cpu']:.2f}×.")
    return L

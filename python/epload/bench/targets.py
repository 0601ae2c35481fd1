"""Targets judged against what the machine allows: a ratio target gives a
budget (the reference's marginal ÷ R), set beside its floor from the same run.
"""

from __future__ import annotations

import os

from .proc import gbench, log
from .report import fmt_ms

REACH = {True: "yes", False: "**no**: the budget is below the floor"}


def budget_floor(t, budget_ms, floor_ms=None):
    """Sets a target's budget (and floor, reachable); returns the target."""
    t["budget_ms"] = budget_ms
    if floor_ms is not None:
        t["floor_ms"] = floor_ms
        t["reachable"] = budget_ms >= floor_ms
    return t


def budget_cells(t):
    """A target's budget, floor and reachable cells ('' where absent)."""
    floor, reach = "", REACH[t["reachable"]] if "reachable" in t else ""
    if "floor_ms" in t:
        floor = fmt_ms(t["floor_ms"]) + (f" ({fmt_ms(t['floor_libraries_ms'])} + "
                                         f"{fmt_ms(t['floor_stats_ms'])} stats)"
                                         if "floor_stats_ms" in t else "")
    elif "floor_libraries_ms" in t:
        floor = f"≥ {fmt_ms(t['floor_libraries_ms'])} + stats"
        reach = "n/a (no stat model: epload_bench absent)"
    return [fmt_ms(t["budget_ms"]) if "budget_ms" in t else "", floor, reach]


STAT_CASES = "StatBaseline|ValidateFull|LoadValidateFull|LoadValidatePaths"


def stat_baseline(bench_exe, distributions, env, tmp, quick, which=STAT_CASES):
    """epload_bench's medians at ``distributions``: {case: {real_ms, cpu_ms}}."""
    rows = gbench(bench_exe, f"^BM_Cache({which})/",
                  dict(env, EPLOAD_BENCH_SIZES=str(distributions)), tmp,
                  3 if quick else 7, 0.05 if quick else 0.2,
                  ["--benchmark_report_aggregates_only=true"])
    res = {}
    for b in rows:
        if b.get("aggregate_name") == "median":
            r = res[b["run_name"].split("/")[0].removeprefix("BM_Cache")] = {
                "real_ms": b["real_ns"] / 1e6, "cpu_ms": b["cpu_ns"] / 1e6}
            if "stats" in b:
                r["stats"] = int(b["stats"])
    return res


def stat_floor(prog, build, distributions, env, tmp, quick):
    """The floor under `full`: its bare stat calls' CPU time ÷ the CPUs."""
    bench_exe = os.path.join(build, "bench", "epload_bench")
    if not os.access(bench_exe, os.X_OK):
        return None
    log(f"{prog}: the bare cost of `full`'s stat calls (epload_bench) ...")
    b = stat_baseline(bench_exe, distributions, env, tmp, quick, "StatBaseline")["StatBaseline"]
    cpus = os.cpu_count() or 1
    return {"cpu_ms": b["cpu_ms"], "real_ms": b["real_ms"], "stats": b.get("stats", 0),
            "cpus": cpus, "distributions": distributions, "floor_ms": b["cpu_ms"] / cpus}

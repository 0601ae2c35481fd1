#!/usr/bin/env python3
"""What `epload profile -- COMMAND` costs the command: COMMAND alone against
COMMAND under the profiler, in interleaved rounds (alone, profiled, alone,
...), so that drift in the machine's load falls on both alike.

    scripts/profile_cost.py [--epload EPLOAD] [--rounds N] -- COMMAND [ARGS...]

For each round it records COMMAND's wall time alone, the wall time the
profile reports for COMMAND itself (its `wall_us`: from its start to its
exit, the trace written at exit included), and the whole `epload profile`
run (merging, the report).  Prints the medians, the ratio of the medians and
the median of the per-round ratios.  The environment is passed as it is
(set EPLOAD_AUTOLOAD_HOSTS=torch to include epload's own work).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def wall(argv, env):
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t, p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epload", default="epload", help="the epload command (default: on PATH)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("a COMMAND is needed after --")
    env = dict(os.environ)
    alone, profiled, whole = [], [], []
    wall(command, env)  # warm the page cache once, untimed
    for _ in range(a.rounds):
        t, p = wall(command, env)
        if p.returncode != 0:
            sys.exit(f"profile_cost.py: {' '.join(command)} exited with status {p.returncode}")
        alone.append(t)
        t, p = wall([a.epload, "profile", "--json", "--", *command], env)
        if p.returncode != 0:
            sys.exit(f"profile_cost.py: epload profile exited with status {p.returncode}")
        whole.append(t)
        profiled.append(json.loads(p.stdout)["wall_us"] / 1e6)
    m_alone, m_prof, m_whole = (statistics.median(x) for x in (alone, profiled, whole))
    paired = statistics.median(p / q for p, q in zip(profiled, alone))
    figures = {"rounds": a.rounds, "alone_ms": round(m_alone * 1e3, 1), "profiled_ms": round(m_prof * 1e3, 1),
               "epload_profile_ms": round(m_whole * 1e3, 1), "ratio_of_medians": round(m_prof / m_alone, 3),
               "median_paired_ratio": round(paired, 3)}
    if a.json:
        print(json.dumps(figures))
    else:
        print(f"{a.rounds} interleaved rounds, medians: alone {figures['alone_ms']} ms, profiled "
              f"{figures['profiled_ms']} ms (the whole epload profile run {figures['epload_profile_ms']} ms); "
              f"ratio {figures['ratio_of_medians']} (median of the per-round ratios "
              f"{figures['median_paired_ratio']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

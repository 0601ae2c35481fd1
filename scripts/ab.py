#!/usr/bin/env python3
"""Whole-process A/B timing: two or more commands interleaved round by round.

    python3 scripts/ab.py [--rounds N] [--warmup W] [--settle S] -- CMD_A ARGS... -- CMD_B ARGS... [-- CMD_C ...]

Every round runs each command once (so drift on the machine hits all alike;
in an order shuffled each round, so no command always follows the same one:
see scripts/harness_common.py) and times it as the harnesses do (wall time;
CPU = the child's user + sys).  Prints, per command, the median, the
interquartile range and the median CPU time, then the median of the paired
per-round differences against the first command and the ratio of medians.
Exits 1 if a command fails (its stderr is shown).  Stdout of the commands
is discarded.  This is how BENCHMARKS.md's two-build figures
are made: compare builds in one run, never across runs.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_common import BenchError, interleaved, summarize  # noqa: E402


def parse(argv):
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            try:
                print(__doc__.strip())
            except BrokenPipeError:  # `ab.py --help | head`
                pass
            raise SystemExit(0)
        print("usage: ab.py [--rounds N] [--warmup W] [--settle S] -- CMD_A ... -- CMD_B ...", file=sys.stderr)
        raise SystemExit(2)
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="ab.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=40, help="timed rounds (default 40)")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    p.add_argument("--settle", type=int, default=0,
                   help="untimed runs of each command right before its timed run, so that it is "
                        "timed after itself rather than after whatever the shuffle put first "
                        "(default 0)")
    args = p.parse_args(argv[:cut])
    cmds, cur = [], []
    for a in argv[cut + 1:]:
        if a == "--":
            cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    if len(cmds) < 2 or any(not c for c in cmds):
        p.error("give at least two non-empty commands, each after '--'")
    for c in cmds:  # posix_spawn does not search PATH
        exe = shutil.which(c[0])
        if exe is None:
            p.error(f"command not found or not executable: {c[0]}")
        c[0] = exe
    if args.rounds < 1 or args.warmup < 0 or args.settle < 0:
        p.error("--rounds must be >= 1, --warmup and --settle >= 0")
    return args, cmds


def main(argv=None):
    args, cmds = parse(sys.argv[1:] if argv is None else argv)
    names = [f"{chr(ord('A') + i)}" for i in range(len(cmds))]
    with tempfile.TemporaryDirectory(prefix="epload-ab-") as tmp:
        try:
            raw = interleaved(dict(zip(names, cmds)), dict(os.environ), args.rounds, args.warmup, tmp,
                              settle=args.settle)
        except BenchError as e:
            print(f"ab.py: {e}", file=sys.stderr)
            return 1
    base = raw[names[0]]["wall"]
    base_median = statistics.median(base)
    for n, c in zip(names, cmds):
        s = summarize(raw[n]["wall"])
        cpu = statistics.median(raw[n]["cpu"]) / 1e6
        paired = statistics.median(a - b for a, b in zip(raw[n]["wall"], base)) / 1e6
        ratio = statistics.median(raw[n]["wall"]) / base_median
        print(f"{n}: median {s['median_ms']:.3f} ms (IQR {s['q1_ms']:.3f}-{s['q3_ms']:.3f}, "
              f"CPU {cpu:.3f}); paired vs A {paired:+.3f} ms; ratio to A {ratio:.3f}   {' '.join(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whole-process A/B timing: two or more commands interleaved round by round.

Per command: median, IQR, CPU median, paired difference and ratio against
the first.  Exits 1 if a command fails.  Compare builds in one run.
"""

import os
import shutil
import statistics

from .options import at_least, parser
from .proc import interleaved
from .stats import summarize_rounds

PROG = "ab.py"


def parse_args(argv):
    cut = argv.index("--") if "--" in argv else len(argv)
    p = parser(PROG, __doc__)
    p.usage = "ab.py [--rounds N] [--warmup W] [--settle S] -- CMD_A ... -- CMD_B ..."
    for option, least, default, what in (
            ("--rounds", 1, 40, "timed rounds"), ("--warmup", 0, 3, "untimed rounds first"),
            ("--settle", 0, 0, "untimed runs of each command right before its timed run")):
        p.add_argument(option, type=at_least(option, least), default=default,
                       help=f"{what} (default {default})")
    args = p.parse_args(argv[:cut])
    cmds = [[]]
    for a in argv[cut + 1:]:
        cmds.append([]) if a == "--" else cmds[-1].append(a)
    if len(cmds) < 2 or any(not c for c in cmds):
        p.error("give at least two non-empty commands, each after '--'")
    for c in cmds:  # posix_spawn does not search PATH
        c[0] = shutil.which(c[0]) or p.error(f"command not found or not executable: {c[0]}")
    args.commands = {chr(ord("A") + i): c for i, c in enumerate(cmds)}
    return args


def run(args, tmp):
    raw = interleaved(args.commands, dict(os.environ), args.rounds, args.warmup, tmp,
                      settle=args.settle)
    stats = summarize_rounds(raw, reference="A")
    for n, c in args.commands.items():
        s = stats[n]
        paired = statistics.median(a - b for a, b in zip(raw[n]["wall"], raw["A"]["wall"])) / 1e6
        print(f"{n}: median {s['median_ms']:.3f} ms (IQR {s['q1_ms']:.3f}-{s['q3_ms']:.3f}, "
              f"CPU {s['cpu_median_ms']:.3f}); paired vs A {paired:+.3f} ms; ratio to A "
              f"{s['median_ms'] / stats['A']['median_ms']:.3f}   {' '.join(c)}")
    return 0

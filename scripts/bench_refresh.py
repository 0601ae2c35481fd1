#!/usr/bin/env python3
"""Process-level benchmark of a stale index: what a fresh process pays after
something changed on its search path, as a ratio to a plain cache hit in the
same run.

The search path is a script's directory (no distribution there; first, as
sys.path[0]) then a generated site-packages (--backends + --noise
distributions).  Two fronts run the same query of one group under `full`
validation, each a whole process:

  py   python3 -I -S -c "sys.path[:0] = [SCRIPT, SITE, <build>/python];
       import epload; epload.entry_points(group=GROUP)"
  cli  epload entry-points --group GROUP --path SCRIPT --path SITE

Cases, timed round by round in this order (so slow drift of the machine hits
them alike), each front brought back to a hit (untimed) before its round;
before each timed run its change is made, untimed, followed by a
pause of 10 ms that puts the change in an earlier clock tick than the run
(its stamps are then not racy, and the next case starts from a hit):

  hit        nothing changed
  new-file   a file created in the script's directory (a hit that lists
             that directory again)
  add        one distribution installed in site-packages
  remove     that distribution removed
  edit       one entry_points.txt rewritten
  cold       the cache file removed first: a full scan and write

Each timed run is checked: hit and new-file must report "index hit", add,
remove and edit "index refreshed" (EPLOAD_DEBUG=1 on every run; its one line
on stderr costs nothing measurable).  Reported: wall and CPU medians per
front and case, and each case's CPU median as a ratio to the hit's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness_common import (  # noqa: E402
    SOURCE_DIR, BenchError, clean_env, generate, harness_main, log, machine)

CASES = ("hit", "new-file", "add", "remove", "edit", "cold")
WANT = {"hit": "index hit", "new-file": "index hit", "add": "index refreshed",
        "remove": "index refreshed", "edit": "index refreshed", "cold": "index rebuilt"}
CLI_WANT = {k: v.replace("index ", "cache ") for k, v in WANT.items()}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench_refresh.py", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", type=int, default=1000, help="backend distributions (1000)")
    p.add_argument("--noise", type=int, default=5000, help="ordinary distributions (5000)")
    p.add_argument("--group", default="torch.backends")
    p.add_argument("--runs", type=int, default=15, help="timed rounds (15)")
    p.add_argument("--quick", action="store_true", help="5 rounds")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter (/usr/bin/python3)")
    p.add_argument("--build", default=os.path.join(SOURCE_DIR, "build"),
                   help="epload build directory (<source>/build)")
    args = p.parse_args(argv)
    if args.quick:
        args.runs = 5
    if args.runs < 1 or args.backends < 1 or args.noise < 0:
        p.error("--runs and --backends must be >= 1, --noise >= 0")
    args.epload = os.path.join(args.build, "epload")
    if not os.access(args.epload, os.X_OK):
        p.error(f"no epload executable at {args.epload}: build it first (scripts/setup.sh)")
    return args


def timed(argv, env):
    """(wall ms, CPU ms of the child, stderr) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = (time.perf_counter_ns() - t0) / 1e6
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise BenchError(f"command failed (exit {proc.returncode}): {' '.join(argv)}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3
    return wall, cpu, proc.stderr


class Tree:
    """The generated tree and the changes the cases make to it."""

    def __init__(self, site, script, cache):
        self.site, self.script, self.cache, self.n = site, script, cache, 0
        self.extra = os.path.join(site, "zz_bench_extra-1.0.dist-info")
        self.edited = next(os.path.join(site, d, "entry_points.txt") for d in sorted(os.listdir(site))
                           if "backend" in d and os.path.exists(os.path.join(site, d, "entry_points.txt")))
        with open(self.edited, encoding="utf-8") as f:
            self.original = f.read()

    def change(self, case):
        self.n += 1
        if case == "new-file":
            with open(os.path.join(self.script, f"out{self.n}.log"), "w") as f:
                f.write("step\n")
        elif case == "add":
            os.makedirs(self.extra)
            with open(os.path.join(self.extra, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: zz_bench_extra\nVersion: 1.0\n\n")
            with open(os.path.join(self.extra, "entry_points.txt"), "w") as f:
                f.write("[torch.backends]\nzz_bench_extra = zz_bench_extra:init\n")
        elif case == "remove":
            shutil.rmtree(self.extra)
        elif case == "edit":
            with open(self.edited, "w", encoding="utf-8") as f:
                f.write(self.original + ("# edited\n" if self.n % 2 else ""))
        elif case == "cold":
            for name in os.listdir(self.cache):
                if name.startswith("index-"):
                    os.unlink(os.path.join(self.cache, name))


def run(args, tmp):
    env = clean_env(tmp)
    env["EPLOAD_DEBUG"] = "1"
    log(f"generating {args.backends + args.noise} distributions ...")
    manifest = generate(args.python, os.path.join(tmp, "env"), args.backends, args.noise, args.group)
    site = manifest["search_path"]
    script = os.path.join(tmp, "script")
    os.makedirs(script)
    fronts = {}
    for front in ("py", "cli"):
        cache = os.path.join(tmp, f"cache-{front}")
        os.makedirs(cache, mode=0o700)
        if front == "py":
            e = dict(env, EPLOAD_CACHE_DIR=cache)
            code = (f"import sys; sys.path[:0] = [{script!r}, {site!r}, {os.path.join(args.build, 'python')!r}]; "
                    f"import epload; epload.entry_points(group={args.group!r})")
            argv = [args.python, "-I", "-S", "-c", code]
        else:
            e = env
            argv = [args.epload, "entry-points", "--group", args.group, "--path", script, "--path", site,
                    f"--cache-dir={cache}"]
        fronts[front] = (argv, e, Tree(site, script, cache))
    samples = {f: {c: {"wall": [], "cpu": []} for c in CASES} for f in fronts}
    for front, (argv, e, _) in fronts.items():  # warm: a hit to start from
        for _ in range(3):
            time.sleep(0.01)
            timed(argv, e)
    log(f"timing {len(CASES)} cases x 2 fronts x {args.runs} rounds ...")
    for r in range(args.runs):
        for front, (argv, e, tree) in fronts.items():
            # The other front changed the shared tree: back to a hit first.
            for _ in range(5):
                time.sleep(0.01)
                if (WANT if front == "py" else CLI_WANT)["hit"] in timed(argv, e)[2]:
                    break
            for case in CASES:
                tree.change(case)
                time.sleep(0.01)
                wall, cpu, err = timed(argv, e)
                want = (WANT if front == "py" else CLI_WANT)[case]
                if want not in err:
                    raise BenchError(f"{front} {case}: expected '{want}', got: {err.strip()}")
                samples[front][case]["wall"].append(wall)
                samples[front][case]["cpu"].append(cpu)
    print(f"# bench_refresh.py: {args.backends + args.noise:,} distributions, {args.runs} rounds\n")
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f}\n")
    print("| front | case | wall median ms | CPU median ms | CPU ÷ hit |")
    print("|---|---|---:|---:|---:|")
    for front in fronts:
        hit = statistics.median(samples[front]["hit"]["cpu"])
        for case in CASES:
            s = samples[front][case]
            cpu = statistics.median(s["cpu"])
            print(f"| {front} | {case} | {statistics.median(s['wall']):.1f} | {cpu:.1f} | {cpu / hit:.2f}x |")
    return 0


def main(argv=None):
    return harness_main("bench_refresh.py", parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())

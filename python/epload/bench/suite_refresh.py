"""Process-level benchmark of a stale index: what a fresh process pays after
something changed on its search path, as a ratio to a cache hit.

Cases (py and cli fronts; each run checked with EPLOAD_DEBUG=1): hit,
new-file, add, remove, edit, cold, new-dir (the first query from a
directory never seen, which holds no distribution, at the head of the
search path as '' is for `python -c`).  Method: BENCHMARKS.md.
"""

from __future__ import annotations

import os
import shutil
import time

from . import options
from .envs import clean_env, config, kept_env
from .proc import BenchError, capture, interleaved, log, progress_line
from .report import fmt_ms, load_average, table, write_report
from .stats import summarize_rounds

PROG = "bench_refresh.py"
CASES = ("hit", "new-file", "add", "remove", "edit", "cold", "new-dir")
WANT = {"hit": "index hit", "new-file": "index hit", "add": "index refreshed",
        "remove": "index refreshed", "edit": "index refreshed", "cold": "index rebuilt",
        "new-dir": "index hit"}
FRONTS = ("py", "cli")
PAUSE = 0.01


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    options.add_common(p, rounds=(15, 5), warmup=(0, 0), plot=False)
    options.add_lookup(p)
    return options.finish(p, p.parse_args(argv), built=True)


class Front:
    """One front's command, environment and cache, and its cases' checks."""

    def __init__(self, name, argv, env, cache, tree, new_dir_argv):
        self.name, self.argv, self.env, self.cache, self.tree = name, argv, env, cache, tree
        self.new_dir_argv = new_dir_argv  # '' first: the directory it runs in
        self.want = {k: v if name == "py" else v.replace("index ", "cache ")
                     for k, v in WANT.items()}

    def to_hit(self):
        """Runs until a hit: the other front's changes made it stale."""
        for _ in range(20):
            time.sleep(PAUSE)
            err = capture(self.argv, self.env).stderr
            if self.want["hit"] in err:
                return
        raise BenchError(f"{self.name}: no '{self.want['hit']}' after 20 runs: {err.strip()}")

    def argv_for(self, case):
        return self.new_dir_argv if case == "new-dir" else self.argv

    def before(self, case):
        def prepare():
            if case == "new-dir":
                self.to_hit()
                os.chdir(self.tree.new_dir())  # the timed run starts there
                return
            if case == "remove" and not os.path.isdir(self.tree.extra):
                self.tree.add()
            elif case == "add" and os.path.isdir(self.tree.extra):
                shutil.rmtree(self.tree.extra)
            self.to_hit()
            self.tree.change(case, self.cache)
            time.sleep(PAUSE)
        return prepare

    def after(self, case):
        def check(stderr_path):
            if case == "new-dir":
                os.chdir(self.tree.home)
            with open(stderr_path, errors="replace") as f:
                err = f.read()
            if self.want[case] not in err:
                raise BenchError(f"{self.name} {case}: expected '{self.want[case]}', "
                                 f"got: {err.strip()}")
        return check


class Tree:
    """The generated tree and the changes the cases make to it."""

    def __init__(self, site, script, home):
        self.site, self.script, self.home, self.n = site, script, home, 0
        self.extra = os.path.join(site, "zz_bench_extra-1.0.dist-info")
        self.edited = next(os.path.join(site, d, "entry_points.txt")
                           for d in sorted(os.listdir(site))
                           if "backend" in d
                           and os.path.exists(os.path.join(site, d, "entry_points.txt")))
        with open(self.edited, encoding="utf-8") as f:
            self.original = f.read()

    def add(self):
        os.makedirs(self.extra)
        with open(os.path.join(self.extra, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: zz_bench_extra\nVersion: 1.0\n\n")
        with open(os.path.join(self.extra, "entry_points.txt"), "w") as f:
            f.write("[torch.backends]\nzz_bench_extra = zz_bench_extra:init\n")

    def new_dir(self):
        """A directory no run has seen, holding a file that is no distribution."""
        self.n += 1
        d = os.path.join(self.home, "dirs", f"d{self.n}")
        os.makedirs(d)
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not a distribution\n")
        return d

    def change(self, case, cache):
        self.n += 1
        if case == "new-file":
            with open(os.path.join(self.script, f"out{self.n}.log"), "w") as f:
                f.write("step\n")
        elif case == "add":
            self.add()
        elif case == "remove":
            shutil.rmtree(self.extra)
        elif case == "edit":
            with open(self.edited, "w", encoding="utf-8") as f:
                f.write(self.original + ("# edited\n" if self.n % 2 else ""))
        elif case == "cold":
            for name in os.listdir(cache):
                if name.startswith("index-"):
                    os.unlink(os.path.join(cache, name))


def fronts(args, tmp, site, script):
    env = dict(clean_env(tmp), EPLOAD_DEBUG="1")
    tree, out = Tree(site, script, tmp), {}
    for front in FRONTS:
        cache = os.path.join(tmp, f"cache-{front}")
        os.makedirs(cache, mode=0o700)
        if front == "py":
            def argv(head):
                code = (f"import sys; sys.path[:0] = [{head!r}, {site!r}, "
                        f"{os.path.join(args.build, 'python')!r}]; "
                        f"import epload; epload.entry_points(group={args.group!r})")
                return [args.python, "-I", "-S", "-c", code]
            out[front] = Front(front, argv(script), dict(env, EPLOAD_CACHE_DIR=cache), cache, tree,
                               argv(""))
        else:
            def argv(head):
                return [args.epload, "entry-points", "--group", args.group,
                        f"--path={head}", "--path", site, f"--cache-dir={cache}"]
            out[front] = Front(front, argv(script), env, cache, tree, argv(""))
    return out


def run(args, tmp):
    manifest = kept_env("bench_refresh", args.python, os.path.join(tmp, "env"), args.backends,
                        args.noise, args.group)
    script = os.path.join(tmp, "script")
    os.makedirs(script)
    fr = fronts(args, tmp, manifest["search_path"], script)
    names = {(f, c): f"{f} {c}" for f in FRONTS for c in CASES}
    log(f"timing {len(CASES)} cases x 2 fronts x {args.rounds} rounds ...")
    raw = interleaved({n: fr[f].argv_for(c) for (f, c), n in names.items()}, None, args.rounds,
                      args.warmup, tmp, progress=progress_line,
                      envs={n: fr[f].env for (f, c), n in names.items()},
                      before={n: fr[f].before(c) for (f, c), n in names.items()},
                      after={n: fr[f].after(c) for (f, c), n in names.items()})
    result = {"config": config(args, distributions=args.backends + args.noise),
              "cases": summarize_rounds(raw)}
    for name, s in result["cases"].items():
        s["cpu_over_hit"] = s["cpu_median_ms"] / result["cases"][name.split()[0] + " hit"][
            "cpu_median_ms"]
    write_report(result, markdown, args.md_out, args.json_out)
    return 0


def markdown(result):
    cfg = result["config"]
    return "\n".join([f"# bench_refresh.py: {cfg['distributions']:,} distributions, "
                      f"{cfg['rounds']} rounds\n",
                      f"{cfg['machine']['cpus']} CPUs; {load_average(cfg)}\n"] + table(
        ["front", "case", "wall median ms", "CPU median ms", "CPU ÷ hit"], "llrrr",
        [name.split(" ", 1) + [fmt_ms(c["median_ms"]), fmt_ms(c["cpu_median_ms"]),
                               f"{c['cpu_over_hit']:.2f}×"]
         for name, c in result["cases"].items()])) + "\n"

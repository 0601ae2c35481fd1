"""Real plugin hosts that walk importlib.metadata.distributions(): pytest and
flake8 starting on a one-file project, with and without many other
distributions on the path, stock and with EPLOAD_IMPORTLIB=1; and the
pluggy-style walk (every distribution's entry_points) timed in-process.

A venv of --python with pytest and flake8 from pip's configured index (made
once under the build and reused), epload from the build through a .pth file
holding the build's python directory and epload-autoload.pth's line.  The
other distributions are generated (one directory per size, put on the path
with PYTHONPATH): console scripts, GUI scripts, several groups, none, egg-info
directories.  Whole processes in interleaved rounds; each ratio is to the
same host in the same venv without those distributions, in the same run;
the switch is measured with `full` validation (the default) and `paths`,
beside its floor (FLOOR_SITE: every walk's answer at hand).
Every host's output is checked equal with and without the switch first.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess

from . import options
from .envs import clean_env, config
from .proc import BenchError, capture, interleaved, log, progress_line
from .report import fmt_ms, load_average, table, write_report
from .stats import ratio, summarize_rounds

PROG = "bench_hosts.py"
HOSTS = {
    "pytest": ["pytest", "-q", "-p", "no:cacheprovider", "test_a.py"],
    "flake8": ["flake8", "test_a.py"],
}
VENV_PACKAGES = ["pytest", "flake8"]
ENV_VERSION = 1

WALK = r'''
import json, sys, time
import epload
from epload import _distributions
stock = _distributions._importlib_distributions
def walk(distributions):
    found = []
    for dist in list(distributions()):
        for ep in dist.entry_points:
            if ep.group != "pytest11":
                continue
            found.append((ep.name, ep.value))
    return found
def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns(); fn(); out.append(time.perf_counter_ns() - t0)
    return out
n = int(sys.argv[1])
assert walk(stock) == walk(epload.distributions), "the walks differ"
# The floor: the objects importlib creates for a walk (a Path and a
# PathDistribution per distribution, an EntryPoint per entry point, an
# EntryPoints per distribution), made as epload makes them, with the index's
# answer at hand: epload's walk less the index.
from epload import _entry_points as E
native = E._native_module()
answer = native.walk(list(sys.path), E._validation(), "", E._use_cache(), E._INTERPRETER, None)
class AtHand:
    validation = staticmethod(native.validation)
    @staticmethod
    def walk(*args):
        return answer
def objects():
    E._native = AtHand
    try:
        walk(epload.distributions)
    finally:
        E._native = native
rows = list(stock())
res = {"stock": timed(lambda: walk(stock), n), "epload": timed(lambda: walk(epload.distributions), n),
       "floor_objects": timed(objects, n), "dists": len(rows), "module": epload.__file__}
if sys.argv[2]:
    # The other floor: `full`'s stats alone, the very check a walk runs
    # (bench/floor_stats_module.cpp), on the index of the same cache file
    # (its key leaves out the first entry, which holds no metadata).
    sys.path.insert(0, sys.argv[2])
    import _epload_floor_stats as floor
    del sys.path[0]
    index = floor.read(list(sys.path[1:]), E._INTERPRETER, "console_scripts")
    assert floor.check(index)[0], "the floor's check failed"
    res["floor_stats"] = timed(lambda: floor.check(index), n)
print("WALK " + json.dumps(res))
'''


# One walk, the first of a fresh process (the cache file warm): what a host
# pays at its first walk (the second walk of pytest's start is a repeat).
FIRST_WALK = r'''
import sys, time
import importlib.metadata as md
import epload
from epload import _distributions
fn = _distributions._importlib_distributions if sys.argv[1] == "stock" else epload.distributions
t0 = time.perf_counter_ns()
for dist in list(fn()):
    for ep in dist.entry_points:
        if ep.group != "pytest11":
            continue
print("FIRST", time.perf_counter_ns() - t0)
'''


# The whole-process floor of the switch: the host started as with
# EPLOAD_IMPORTLIB=1, every walk answered by epload's own Python code from
# the native walk's answer recorded earlier in a run of the same command
# (marshal), so no index is read and nothing is stat'ed; what is left is what
# a walk must cost at least: the objects importlib creates, epload's import.
# A walk the recording does not hold fails the command (then its output
# differs, and the run stops).  sitecustomize.py of a directory first on
# PYTHONPATH (site imports it after the .pth files).
FLOOR_SITE = r'''
import atexit, marshal, os
from epload import _entry_points as E
native = E._native_module()
file = os.environ["BENCH_FLOOR_WALKS"]
record = os.environ.get("BENCH_FLOOR_RECORD") == "1"
answers = {}
if not record:
    with open(file, "rb") as f:
        answers = marshal.load(f)
class AtHand:
    def __getattr__(self, name):
        return getattr(native, name)
    def walk(self, paths, *rest):
        key = (tuple(paths), rest[-1])
        if record:
            answers[key] = native.walk(paths, *rest)
        elif key not in answers:
            raise RuntimeError(f"bench floor: no recorded walk of {key}")
        return answers[key]
E._native = AtHand()
def save():
    with open(file, "wb") as f:
        marshal.dump(answers, f)
if record:
    atexit.register(save)
'''


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    options.add_common(p, rounds=(11, 3), warmup=(1, 1), plot=False,
                       env_dir="where the venv and the generated distributions are kept "
                               "(default: under the build)")
    p.add_argument("--dists", default="500,6000",
                   help="how many other distributions, comma-separated (500,6000)")
    p.add_argument("--walks", type=int, default=15, help="in-process walks timed per side (15)")
    p.add_argument("--before", metavar="BUILD",
                   help="an epload build of another revision, timed beside this one in the same "
                        "rounds (its python directory first on PYTHONPATH; this one's too, alike)")
    args = options.finish(p, p.parse_args(argv))
    if not os.path.isfile(os.path.join(args.build, "python", "epload-autoload.pth")):
        p.error(f"no epload package in {args.build}/python: build first (scripts/setup.sh) "
                "or pass --build DIR")
    try:
        args.size_list = sorted({int(n) for n in args.dists.split(",") if n.strip()})
    except ValueError:
        p.error(f"--dists must be comma-separated integers, got {args.dists!r}")
    if not args.size_list or min(args.size_list) < 1:
        p.error("--dists: each count must be at least 1")
    if args.before and not os.path.isdir(os.path.join(args.before, "python", "epload")):
        p.error(f"--before: no epload package in {args.before}/python")
    return args


def make_dists(where, n):
    """``n`` distributions in ``where`` (made once): the shapes of an
    ordinary environment, none of them a pytest or flake8 plugin."""
    stamp = os.path.join(where, "generated.json")
    want = {"n": n, "version": ENV_VERSION}
    try:
        with open(stamp) as f:
            if json.load(f) == want:
                return where
    except (OSError, ValueError):
        pass
    subprocess.run(["rm", "-rf", where], check=True)
    os.makedirs(where)
    for i in range(n):
        name = f"other_pkg_{i:05d}"
        shape = i % 20
        info = os.path.join(where, f"{name}-1.{i % 7}.0" + (".egg-info" if shape == 19 else ".dist-info"))
        os.mkdir(info)
        with open(os.path.join(info, "PKG-INFO" if shape == 19 else "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.{i % 7}.0\n\n")
        eps = None
        if shape < 8:
            eps = f"[console_scripts]\n{name} = {name}.cli:main\n"
        elif shape < 10:
            eps = (f"[console_scripts]\n{name} = {name}.cli:main\n\n"
                   f"[gui_scripts]\n{name}-gui = {name}.gui:main\n")
        elif shape < 11:
            eps = (f"[babel.extractors]\n{name} = {name}.babel:extract\n\n"
                   f"[console_scripts]\n{name} = {name}.cli:main [cli]\n\n"
                   f"[sphinx.builders]\n{name} = {name}.sphinx:Builder\n")
        elif shape == 19:
            eps = f"[console_scripts]\n{name} = {name}:main\n"
        if eps is not None:
            with open(os.path.join(info, "entry_points.txt"), "w") as f:
                f.write(eps)
    with open(stamp, "w") as f:
        json.dump(want, f)
    return where


def make_venv(args, where):
    """The venv (made once): pytest and flake8 from pip's index, epload from
    the build through a .pth file."""
    venv = os.path.join(where, "venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, "bin", "flake8")):
        subprocess.run(["rm", "-rf", venv], check=True)
        log(f"making {venv} (pip install {' '.join(VENV_PACKAGES)})")
        capture([args.python, "-m", "venv", venv], dict(os.environ))
        capture([python, "-m", "pip", "install", "-q", *VENV_PACKAGES], dict(os.environ))
    site = capture([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   dict(os.environ)).stdout.strip()
    with open(os.path.join(args.build, "python", "epload-autoload.pth")) as f:
        hook = f.read().strip()
    with open(os.path.join(site, "epload-build.pth"), "w") as f:
        f.write(os.path.join(os.path.abspath(args.build), "python") + "\n" + hook + "\n")
    versions = json.loads(capture([python, "-c", "import json, importlib.metadata as m; print(json.dumps("
                                   "{p: m.version(p) for p in ('pytest', 'flake8', 'pluggy')}))"],
                                  dict(os.environ)).stdout)
    return venv, versions


def run(args, tmp):
    where = args.env_dir or os.path.join(args.build, "bench-hosts")
    os.makedirs(where, exist_ok=True)
    venv, versions = make_venv(args, where)
    work = os.path.join(tmp, "project")
    os.makedirs(work)
    with open(os.path.join(work, "test_a.py"), "w") as f:
        f.write("def test_a():\n    assert 1 + 1 == 2\n")
    base = dict(clean_env(tmp), EPLOAD_CACHE_DIR=os.path.join(tmp, "cache"))
    base.pop("PYTHONPATH", None)
    result = {"config": config(args, sizes=args.size_list, versions=versions), "sizes": {}}
    for n in args.size_list:
        dists = make_dists(os.path.join(where, f"dists-{n}"), n)
        envs = {"without": base, "stock": dict(base, PYTHONPATH=dists),
                "switch": dict(base, PYTHONPATH=dists, EPLOAD_IMPORTLIB="1"),
                "paths": dict(base, PYTHONPATH=dists, EPLOAD_IMPORTLIB="1", EPLOAD_VALIDATE="paths")}
        if args.before:
            # Both revisions with their python directory first on the path.
            for side, build in (("before", args.before), ("after", args.build)):
                front = os.path.join(os.path.abspath(build), "python") + os.pathsep + dists
                envs[f"{side} switch"] = dict(envs["switch"], PYTHONPATH=front)
                envs[f"{side} paths"] = dict(envs["paths"], PYTHONPATH=front)
        commands, cmd_envs = {}, {}
        floor_site = os.path.join(tmp, "floor-site")
        os.makedirs(floor_site, exist_ok=True)
        with open(os.path.join(floor_site, "sitecustomize.py"), "w") as f:
            f.write(FLOOR_SITE)
        for host, argv in HOSTS.items():
            full = [os.path.join(venv, "bin", argv[0]), *argv[1:]]
            walks_file = os.path.join(tmp, f"floor-{host}-{n}.marshal")
            floor_env = dict(envs["switch"], PYTHONPATH=floor_site + os.pathsep + dists,
                             BENCH_FLOOR_WALKS=walks_file)
            subprocess.run(full, env=dict(floor_env, BENCH_FLOOR_RECORD="1"), cwd=work,
                           capture_output=True)
            host_envs = dict(envs, floor=floor_env)
            outputs = {}
            for variant, env in host_envs.items():
                proc = subprocess.run(full, env=env, cwd=work, capture_output=True, text=True)
                outputs[variant] = (proc.returncode, _steady(proc.stdout))
            if len(set(outputs.values())) != 1:
                raise BenchError(f"{host} answers differently: {outputs}")
            for variant, env in host_envs.items():
                commands[f"{host} {variant}"] = full
                cmd_envs[f"{host} {variant}"] = env
        log(f"{n:,} distributions: {len(commands)} commands, {args.rounds} rounds")
        cwd = os.getcwd()
        os.chdir(work)  # the project is the processes' current directory
        try:
            raw = interleaved(commands, base, args.rounds, args.warmup, tmp, progress=progress_line,
                              envs=cmd_envs)
        finally:
            os.chdir(cwd)
        stats = summarize_rounds(raw)
        python = os.path.join(venv, "bin", "python")
        floor_dir = os.path.join(args.build, "bench")
        if not glob.glob(os.path.join(floor_dir, "_epload_floor_stats.*.so")):
            floor_dir = ""  # a build without the benchmarks: no stats floor

        def walks(env, floor):
            # A cache directory of its own: the floor reads the file its walk wrote.
            cache = os.path.join(tmp, f"walk-cache-{len(os.listdir(tmp))}")
            return json.loads(capture([python, "-c", WALK, str(args.walks), floor],
                                      dict(env, EPLOAD_CACHE_DIR=cache)).stdout.split("WALK ", 1)[1])
        walk = walks(envs["switch"], floor_dir)
        walk["paths"] = walks(envs["paths"], "")
        firsts = {"stock": envs["stock"], "epload": envs["stock"],
                  "paths": dict(envs["stock"], EPLOAD_VALIDATE="paths")}
        if args.before:
            walk["before"] = walks(envs["before switch"], "")  # the same stats floor
            if not walk["before"]["module"].startswith(os.path.abspath(args.before)):
                raise BenchError(f"--before: the walk ran {walk['before']['module']}")
            firsts["before"] = dict(envs["stock"], PYTHONPATH=envs["before switch"]["PYTHONPATH"])
        for _ in range(args.walks):
            for side, env in firsts.items():
                out = capture([python, "-c", FIRST_WALK, side], dict(env)).stdout
                walk.setdefault("first_" + side, []).append(int(out.split("FIRST ", 1)[1]))
        result["sizes"][str(n)] = {"stats": stats, "walk": walk}
    write_report(result, markdown, md_out=args.md_out, json_out=args.json_out)
    return 0


def _steady(text):
    """Output less its timings ("1 passed in 0.01s")."""
    import re
    return re.sub(r" in [0-9.]+s", "", text)


def fmt_ratio(r):
    """Ratios near 1 need two decimals."""
    return "n/a" if r is None else f"{r:.2f}×" if r < 10 else f"{r:.1f}×"


def _median_ms(samples):
    import statistics
    return statistics.median(samples) / 1e6


def markdown(result):
    cfg = result["config"]
    lines = [f"Plugin hosts walking `distributions()` (pytest {cfg['versions']['pytest']}, "
             f"flake8 {cfg['versions']['flake8']}, pluggy {cfg['versions']['pluggy']}), whole "
             f"processes, medians of {cfg['rounds']} interleaved rounds; {load_average(cfg)}.", ""]
    rows = []
    before = any(f"{h} before switch" in r["stats"] for r in result["sizes"].values() for h in HOSTS)
    variants = ["stock", "switch", "paths", "floor"] + (
        ["before switch", "after switch", "before paths", "after paths"] if before else [])
    for n, r in result["sizes"].items():
        s = r["stats"]
        for host in HOSTS:
            w = s[f"{host} without"]["median_ms"]
            rows.append([f"{int(n):,}", host, fmt_ms(w)] + [
                f"{fmt_ms(s[f'{host} {v}']['median_ms'])} ({fmt_ratio(ratio(s[f'{host} {v}']['median_ms'], w))})"
                for v in variants])
    heads = ["stock ms (ratio)", "EPLOAD_IMPORTLIB=1 ms (ratio)", "… EPLOAD_VALIDATE=paths ms (ratio)",
             "floor: walks at hand ms (ratio)"]
    if before:
        heads += ["switch, --before ms (ratio)", "switch, this build ms (ratio)",
                  "paths, --before ms (ratio)", "paths, this build ms (ratio)"]
    lines += table(["other dists", "host", "without them ms", *heads], "rlr" + "r" * len(heads), rows)
    lines += ["", "The floor: the switch with every walk's answer at hand (recorded in an earlier "
              "run of the command): no index read, no stat; the objects importlib creates and "
              "epload's import are what is left."]
    lines += ["", "The pluggy-style walk in-process (every distribution's `entry_points`), "
              "medians: a process's first walk, and a repeated walk:", ""]
    rows = []
    for n, r in result["sizes"].items():
        sides = [("this build", r["walk"], "first_epload")]
        if "before" in r["walk"]:
            sides.insert(0, ("--before", r["walk"]["before"], "first_before"))
        if "paths" in r["walk"]:
            sides.append(("this build, `paths`", r["walk"]["paths"], "first_paths"))
        for label, w, first in sides:
            first_stock, first_ours, stock, ours, floor = (
                _median_ms(src[k]) for src, k in ((r["walk"], "first_stock"), (r["walk"], first),
                                                  (w, "stock"), (w, "epload"), (w, "floor_objects")))
            # `paths` promises no stats of watched files: its floor is the objects.
            stats = (_median_ms(r["walk"]["floor_stats"])
                     if "floor_stats" in r["walk"] and first != "first_paths" else None)
            rows.append([f"{w['dists']:,}", label, fmt_ms(first_stock), fmt_ms(first_ours),
                         fmt_ratio(ratio(first_stock, first_ours)), fmt_ms(stock), fmt_ms(ours),
                         fmt_ratio(ratio(stock, ours)), fmt_ms(floor),
                         "n/a" if stats is None else fmt_ms(stats),
                         fmt_ratio(ratio(stock, floor + (stats or 0.0)))])
    lines += table(["distributions", "epload", "first: stock ms", "epload ms", "cheaper", "repeated: stock ms",
                    "epload ms", "cheaper", "floor: the objects alone ms", "floor: `full`'s stats alone ms",
                    "stock ÷ both floors"], "rlrrrrrrrrr", rows)
    return "\n".join(lines) + "\n"

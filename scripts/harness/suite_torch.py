"""Real PyTorch start-up harness: `import torch` with its device backends,
stock autoload against epload (torch 2.13.0 venv, fixture backends).

Per --sizes (0 = fixtures alone), whole processes, verified, interleaved:
{listing}
Targets and method: BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from . import options
from .envs import SOURCE_DIR, clean_env, config, kept_env, torch_python
from .proc import BenchError, capture, interleaved, log, marked, read_json
from .report import (TIMES, fmt_ms, load_average, plot_marginals, table, times,
                     write_report)
from .stats import paired_ci, summarize, summarize_rounds
from .targets import budget_cells, budget_floor, stat_floor
from .verify import Variants, index_hit

PROG = "bench_torch.py"
GROUP = "torch.backends"
VERIFY_MARK = "EPLOAD-BENCH-TORCH "
TIME_MARK = "EPLOAD-BENCH-FIRST-NS "
OFF = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
LAZY = {"EPLOAD_AUTOLOAD_HOSTS": "torch", "EPLOAD_MODE": "lazy"}
TO_FOO = "x = torch.ones(2).to({device!r})"
# The variants, in report order: name -> (label, variables, body after
# `import torch`).  {device} is --device, {call} foo's entry point called.
VARIANTS = {
    "floor": ("`import torch`, autoload off: the floor", OFF, ""),
    "stock": ("stock autoload (importlib.metadata, every backend)", {}, ""),
    "epload-eager": ("epload eager", dict(LAZY, EPLOAD_MODE="eager"), ""),
    "epload-lazy": ("epload lazy, `full`", LAZY, ""),
    "epload-lazy-paths": ("epload lazy, `paths`", dict(LAZY, EPLOAD_VALIDATE="paths"), ""),
    "epload-lazy-dirty": ("epload lazy, `full`, script's directory changed before each run",
                          LAZY, ""),
    "lazy-first-foo": ("epload lazy + first `to(\"foo\")`", LAZY, TO_FOO),
    "foo-by-hand": ("autoload off, foo by hand + `to(\"foo\")`", OFF, "{call}; " + TO_FOO),
}
EPLOAD_VARIANTS = ("epload-eager", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty",
                   "lazy-first-foo")
# Variants that must import no backend (foo included).
IMPORTS_NONE = ("floor", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty")
# A variant whose own directory comes first on sys.path (a script's, as
# sys.path[0] is) and gets a new file before each run, untimed.
DIRTY = "epload-lazy-dirty"
LOADS_ALL = ("stock", "epload-eager")
# Timed inside the processes at the largest size, interleaved: name ->
# (variables, the code timed after `import torch`).
IN_PROCESS = {"lazy": (LAZY, TO_FOO), "by-hand": (OFF, "{call}; " + TO_FOO)}
# Test-only sabotage (--break-variant): name -> (variables added, body).
BREAK = {"stock": ({"EPLOAD_GEN_HOST": "no_such_host_module"}, None),
         "epload-eager": ({"EPLOAD_GEN_HOST": "no_such_host_module"}, None),
         "epload-lazy": ({"EPLOAD_MODE": "eager"}, None),
         "epload-lazy-paths": ({"EPLOAD_MODE": "eager"}, None),
         "foo-by-hand": ({}, "import {module}; " + TO_FOO)}
# The targets.
LAZY_FULL_MAX_PCT = 1.0     # lazy (`full`) at the largest size: at most 1% above the floor
STOCK_OVER_LAZY = 100.0     # stock's marginal ÷ lazy's, at RATIO_SIZE backends
RATIO_SIZE = 100
FIRST_USE_SLACK_MS = 1.0    # first to("foo") ≤ foo's own import cost + 1 ms
# Fewer whole-process rounds give no interval worth a verdict: the targets
# that need one are then reported, not judged.
MIN_JUDGE_ROUNDS = 7
FIXTURE_DIR = os.path.join(SOURCE_DIR, "tests", "torch", "backends")
# The fixture backends that load cleanly under stock autoload; foo is the
# PrivateUse1 one (entry-point and device name).
DEFAULT_FIXTURES = ("common", "foo", "hook", "bar")
FOO = "foo"
LABELS = {v: x[0] for v, x in VARIANTS.items()}

DESCRIBE = """import json, os, sys, importlib.metadata as m, importlib.util as u
sys.path += {fixtures!r}
import torch
eps = [[e.name, e.value, e.dist.name if e.dist else None]
       for e in m.entry_points(group='torch.backends')]
ep = u.find_spec('epload')
hook = [os.path.join(p, 'epload-autoload.pth') for p in sys.path
        if os.path.isfile(os.path.join(p, 'epload-autoload.pth'))]
print(json.dumps({{'torch': torch.__version__, 'torch_dir': os.path.dirname(torch.__file__),
                  'python': sys.version.split()[0], 'executable': sys.executable,
                  'prefix': sys.prefix, 'epload': ep.origin if ep else None,
                  'hook': hook[0] if hook else None, 'backends': eps}}))
"""


def describe_python(python, env, fixtures):
    """torch's version and location, epload's, the hook, and the backends."""
    try:
        proc = capture([python, "-I", "-c", DESCRIBE.format(fixtures=fixtures)], dict(env, **OFF))
    except BenchError as err:
        raise BenchError(f"{python} cannot `import torch`: {err}\nThe harness needs a venv "
                         "with torch==2.13.0, epload and the fixture backends (see --help)")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    if not info["epload"]:
        raise BenchError(f"{python}: epload is not installed in it")
    if not info["hook"]:
        raise BenchError(f"{python}: epload-autoload.pth is not on its sys.path (epload's "
                         ".pth hook): EPLOAD_AUTOLOAD_HOSTS would do nothing")
    return info


PROBE = ("\nimport json as _j\n"
         "_t = sys.modules.get('torch')\n"
         "_x = globals().get('x')\n"
         "_r = {{'modules': sum(1 for k in list(sys.modules) if k.startswith('gen_backend_')),\n"
         "      'devices': sum(1 for k in list(vars(_t)) if k.startswith('dev')"
         " and k[3:].isdigit()),\n"
         "      'foo': {module!r} in sys.modules,\n"
         "      'epload': 'epload' in sys.modules,\n"
         "      'x': None if _x is None else [_x.device.type, _x.cpu().tolist()]}}\n"
         f"print({VERIFY_MARK!r} + _j.dumps(_r))\n")


class Size(Variants):
    """The variants at one size (``manifest`` None: the fixtures alone)."""

    # The first run is lazy, as a user's first lazy run: it loads every
    # backend whose devices are not known yet and learns them (foo's too).
    mark, warm, retried = VERIFY_MARK, ("epload-lazy",), EPLOAD_VARIANTS

    def __init__(self, args, info, manifest, work):
        self.python, self.work = args.python, work
        self.base, self.labels = clean_env(work), LABELS
        self.paths = args.fixtures + ([manifest["search_path"]] if manifest else [])
        self.n = len(manifest["backends"]) if manifest else 0
        self.where = f"{self.n:,} generated backends"
        self.fixtures = info["backends"]
        foo = [b for b in self.fixtures if b[0] == FOO]
        if not foo:
            raise BenchError(f"the venv holds no torch.backends entry point named {FOO!r} "
                             f"(found: {', '.join(b[0] for b in self.fixtures) or 'none'}); "
                             "install the fixture backends of tests/torch/backends")
        module, _, attr = (x.strip() for x in foo[0][1].partition(":"))
        self.foo_module, self.variants = module, list(VARIANTS)
        fmt = {"device": FOO, "module": module,
               "call": f"from {module} import {attr} as _f; _f()" if attr else f"import {module}"}
        self.code = {v: ("import torch; " + b.format(**fmt)).rstrip("; ")
                     for v, (_, _, b) in VARIANTS.items()}
        # A training script's outputs or an editor's save change the
        # directory; that entry is listed again, the index must still hit.
        # Every variant has a script's directory first on sys.path, as a
        # script has (each of torch's imports looks there first): the others
        # one that never changes, so that DIRTY differs from them, the floor
        # included, only in that its directory changed.
        self.script_dir, self.outputs = os.path.join(work, "script-dir"), 0
        quiet_dir = os.path.join(work, "script-dir-quiet")
        for d in (self.script_dir, quiet_dir):
            os.makedirs(d)
        for v in self.code:
            first = self.script_dir if v == DIRTY else quiet_dir
            self.code[v] = f"sys.path.insert(0, {first!r}); " + self.code[v]
        self.envs = {v: dict(self.base, **VARIANTS[v][1]) for v in self.variants}
        if args.break_variant:
            more, body = BREAK[args.break_variant]
            self.envs[args.break_variant].update(more)
            if body:
                self.code[args.break_variant] = "import torch; " + body.format(**fmt)
        self.commands = {v: self.argv(self.code[v]) for v in self.variants}
        timed = ("import torch; import time as _t; _t0 = _t.perf_counter_ns(); {work}; "
                 f"print({TIME_MARK!r} + str(_t.perf_counter_ns() - _t0))")
        self.timed = {k: self.argv(timed.format(work=code.format(**fmt)))
                      for k, (_, code) in IN_PROCESS.items()}
        self.timed_envs = {k: dict(self.base, **env) for k, (env, _) in IN_PROCESS.items()}
        # Untimed work before each run of a variant (name -> callable).
        self.before = {DIRTY: self.touch_script_dir}
        self.probe = PROBE.format(module=self.foo_module)

    def touch_script_dir(self):
        self.outputs += 1
        with open(os.path.join(self.script_dir, f"out-{self.outputs}.log"), "w") as f:
            f.write("step\n")

    def argv(self, body, suffix=""):
        return [self.python, "-I", "-c", f"import sys; sys.path += {self.paths!r}; {body}{suffix}"]

    def probe_run(self, v):
        env = dict(self.envs[v], **({"EPLOAD_DEBUG": "1"} if v in EPLOAD_VARIANTS else {}))
        return self.argv(self.code[v], self.probe), env

    def problems(self, v, r, stderr):
        n, out, device = self.n, [], FOO
        if v in LOADS_ALL:
            if r["modules"] != n or r["devices"] != n:
                out.append(f"imported {r['modules']} of the {n} generated backends, "
                           f"{r['devices']} device attributes on torch")
            if not r["foo"]:
                out.append(f"did not import {self.foo_module}")
        elif r["modules"] or r["devices"]:
            out.append(f"imported {r['modules']} generated backend(s) ({r['devices']} device "
                       "attributes on torch); expected none")
        if v in IMPORTS_NONE and r["foo"]:
            out.append(f"imported {self.foo_module}; expected not")
        if v in ("lazy-first-foo", "foo-by-hand") and (
                r["x"] is None or r["x"][0] != device or r["x"][1] != [1.0, 1.0]):
            out.append(f"torch.ones(2).to({device!r}) gave {r['x']}")
        if (v in EPLOAD_VARIANTS) != r["epload"]:
            out.append("imported epload" if r["epload"] else "did not import epload")
        return out + (index_hit(stderr) if v in EPLOAD_VARIANTS else [])

    def in_process(self, runs):
        """Per run (ns): the .pth hook's import and epload's share of `import torch`."""
        out = {"pth": [], "import_torch": [], "in_import": []}
        env = self.envs["epload-lazy"]
        for k in range(runs):
            proc = capture([self.python, "-X", "importtime"] + self.argv("pass")[1:], env)
            out["pth"].append(hook_import_ns(proc.stderr))
            path = os.path.join(self.work, f"lazy-trace-{k}.json")
            capture(self.commands["epload-lazy"], dict(env, EPLOAD_TRACE=path))
            whole, added = epload_share(path)
            out["import_torch"].append(whole)
            out["in_import"].append(added)
        return out

def epload_share(trace_path):
    """(the `import torch` span, that less "body of torch") of a trace, ns."""
    events = [e for e in read_json(trace_path)["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "total"]
    spans = {}
    for name in ("import torch", "body of torch"):
        found = [e for e in events if e["name"] == name]
        if len(found) != 1:
            raise BenchError(f"{trace_path}: {len(found)} `{name}` spans, not one (an epload "
                             "without the host-body span?)")
        spans[name] = found[0]["dur"]
    return int(spans["import torch"] * 1e3), int((spans["import torch"]
                                                  - spans["body of torch"]) * 1e3)


def hook_import_ns(importtime_stderr, missing=None):
    """``epload._hook``'s cumulative -X importtime, ns (else ``missing``)."""
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == "epload._hook":
            return int(line.split("|")[1]) * 1000
    if missing is not None:
        return missing
    raise BenchError("no `epload._hook` import in -X importtime's output: is the .pth hook "
                     "installed and EPLOAD_AUTOLOAD_HOSTS set?\n" + importtime_stderr[-500:])


def analyse(raw):
    stats = summarize_rounds(raw, reference="floor")
    f = stats["floor"]["median_ms"]
    for v, s in stats.items():
        s["marginal_pct"] = 100.0 * s["marginal_ms"] / f
        if v != "floor":
            s["paired"] = paired_ci(raw[v]["wall"], raw["floor"]["wall"])
            s["paired_cpu"] = paired_ci(raw[v]["cpu"], raw["floor"]["cpu"])
    return stats


def whole_process(stats):
    p = stats["paired"]
    return (f"whole process {p['median_ms']:+.1f} ms, 95% CI [{p['ci95_ms'][0]:+.1f}, "
            f"{p['ci95_ms'][1]:+.1f}]")


def judge(sizes, first, stat_base, rounds):
    """The real-torch targets, each with its budget (see targets_table)."""
    big = max(sizes, key=lambda r: (r["distributions"], r["backends"]))
    st, added = big["stats"], big["in_process"]["total"]["median_ms"]
    floor_ms = st["floor"]["median_ms"]
    budget = floor_ms * LAZY_FULL_MAX_PCT / 100

    def where(r):
        return f"{r['backends']:,} generated backends, {r['distributions']:,} distributions"

    def target(text, measured, met, budget_ms=None, floor=None, interval=True, at=where(big)):
        t = {"target": text, "where": at, "measured": measured, "met": met}
        if budget_ms is not None:
            budget_floor(t, budget_ms, floor)
        if interval and rounds < MIN_JUDGE_ROUNDS and met is not None:
            t.update(met=None,
                     unjudged=f"not judged: {rounds} rounds (needs ≥ {MIN_JUDGE_ROUNDS})")
        return t

    def low(s):  # the lower end of a variant's paired interval
        return s["paired"]["ci95_ms"][0]
    lazy, paths, dirty = st["epload-lazy"], st["epload-lazy-paths"], st.get(DIRTY)
    out = [target(f"lazy `import torch` (`full`) ≤ {LAZY_FULL_MAX_PCT:g}% above the floor",
                  f"in-process {added:.2f} ms ({100 * added / floor_ms:.2f}% of the floor's "
                  f"{fmt_ms(floor_ms)} ms); " + whole_process(lazy),
                  added <= budget and low(lazy) <= budget, budget,
                  stat_base["floor_ms"] if stat_base else None),  # full's stat calls, bare
           # No cost detectable above the floor: the interval reaches 0 or
           # below (wholly below is drift between rounds, not a gain).
           target("lazy `import torch` (`paths`) within noise of the floor",
                  whole_process(paths), low(paths) <= 0)]
    ratio = f"stock's added cost ÷ lazy's ≥ {STOCK_OVER_LAZY:g}×"
    row = next((r for r in sizes if r["backends"] == RATIO_SIZE), None)
    if row is None:
        out.append(dict(target(f"{ratio} at {RATIO_SIZE} backends", "n/a", None,
                               at="not measured (size absent)"), unjudged="not measured"))
    else:
        stock, lazy = row["stats"]["stock"], row["stats"]["epload-lazy"]
        added, gain = row["in_process"]["total"]["median_ms"], stock["paired"]["median_ms"]
        r, ci = gain / added if added else None, stock["paired"]["ci95_ms"]
        out.append(target(
            ratio, (f"{r:,.0f}×: stock {gain:+,.0f} ms (paired, 95% CI [{ci[0]:+,.0f}, "
                    f"{ci[1]:+,.0f}]) ÷ lazy in-process {added:.2f} ms" if r else "in-process n/a")
            + "; lazy's " + whole_process(lazy),
            r is not None and r >= STOCK_OVER_LAZY and low(lazy) <= gain / STOCK_OVER_LAZY,
            gain / STOCK_OVER_LAZY, at=where(row)))
    if first:
        lz, bh = first["lazy_ms"], first["by_hand_ms"]
        out.append(target(f"first `to(\"foo\")` ≤ foo's own import cost + "
                          f"{FIRST_USE_SLACK_MS:g} ms",
                          f"{lz:.2f} ms against {bh:.2f} ms by hand ({lz - bh:+.2f} ms)",
                          lz <= bh + FIRST_USE_SLACK_MS, bh + FIRST_USE_SLACK_MS,
                          interval=False, at=where(big) + ", in-process"))
    if dirty is not None:
        # A whole-process figure: the in-process share is the lazy one's
        # plus the listing of the changed script's directory.
        out.append(target("lazy `import torch` (`full`), script's directory changed before "
                          f"each run, ≤ {LAZY_FULL_MAX_PCT:g}% above the floor",
                          whole_process(dirty), low(dirty) <= budget, budget))
    return out


def interval(p, noise=True):
    return "" if p is None else (f"{p['median_ms']:+.2f} [{p['ci95_ms'][0]:+.2f}, "
                                 f"{p['ci95_ms'][1]:+.2f}]"
                                 + (" within noise" if noise and p["within_noise"] else ""))


def markdown(result):
    cfg, info = result["config"], result["torch"]
    L = [f"### Real PyTorch {info['torch']}: `import torch` with "
         f"{', '.join(f'{n:,}' for n in cfg['sizes'])} generated backends among "
         f"{cfg['noise']:,} ordinary distributions\n",
         f"torch {info['torch']} from `{info['torch_dir']}` (Python {info['python']}, "
         f"`{cfg['python']}`); epload from `{info['epload']}`; fixture backends: "
         f"{', '.join(b[0] for b in info['backends'])}. Each generated backend's import "
         f"burns {cfg['import_cost_ms']:g} ms. {cfg['rounds']} interleaved rounds after "
         f"{cfg['warmup']} warm-up, whole-process medians; {cfg['machine']['cpus']} CPUs, "
         f"{load_average(cfg)}.\n"]
    for row in result["sizes"]:
        rows = [[label] + times(s)
                + (["", ""] if v == "floor" else [fmt_ms(s["marginal_ms"]),
                                                  f"{s['marginal_pct']:+.2f}%"])
                + [interval(s.get("paired")), interval(s.get("paired_cpu"), False)]
                for v, (label, *_) in VARIANTS.items() if (s := row["stats"].get(v))]
        L += [f"#### {row['backends']:,} generated backends + {row['fixtures']} fixtures "
              f"({row['distributions']:,} distributions)\n"] + table(
            ["variant", *TIMES, "over floor ms", "over floor %",
             "paired median ms [95% CI]", "CPU over floor ms [95% CI]"], "lrrrrrll", rows) + [""]
    if result.get("first_use"):
        f = result["first_use"]
        L += [f"#### First `torch.ones(2).to(\"foo\")`, in-process ({f['runs']} pairs, "
              f"{f['backends']:,} generated backends)\n"] + table(
            ["process", "median ms", "IQR ms"], "lrr",
            [[what, f"{f[k]['median_ms']:.2f}", f"{f[k]['q1_ms']:.2f}–{f[k]['q3_ms']:.2f}"]
             for k, what in (("lazy", "lazy: the first `to(\"foo\")` (imports foo)"),
                             ("by_hand", "autoload off: foo's entry point by hand, then "
                                         "`to(\"foo\")`"))]) + [""]
    return "\n".join(L + in_process_table(result["sizes"])
                     + targets_table(result["targets"])) + "\n"


def in_process_table(sizes):
    """What lazy epload adds, measured inside its processes, per size."""
    rows = [[f"{r['backends']:,}", str(ip["runs"]), fmt_ms(ip["import_torch"]["median_ms"]),
             f"{ip['pth']['median_ms']:.2f}", f"{ip['in_import']['median_ms']:.2f}",
             f"{t['median_ms']:.2f} ({t['q1_ms']:.2f}–{t['q3_ms']:.2f})",
             f"{100 * t['median_ms'] / r['stats']['floor']['median_ms']:.2f}%"]
            for r in sizes for ip, t in [(r["in_process"], r["in_process"]["total"])]]
    return ["#### What lazy epload adds, measured inside the processes\n"] + table(
        ["generated backends", "runs", "`import torch` ms", ".pth hook's import ms",
         "added inside `import torch` ms", "epload in all, ms (IQR)", "% of the floor"],
        "rrrrrlr", rows) + [
        "\nThe .pth hook's import: `-X importtime`'s cumulative time of `epload._hook` "
        "at interpreter start. Added inside `import torch`: the trace's (EPLOAD_TRACE) "
        "`import torch` span less torch's own body (`body of torch`): epload's "
        "imports, its native module, discovery, matching, the hook backend's load. "
        "In all: the median of the per-run sums.\n"]


def targets_table(targets):
    """The real-torch targets with their budgets and floors."""
    rows = [[t["target"], t["where"], t["measured"],
             t.get("unjudged", "n/a") if t["met"] is None else ("yes" if t["met"] else "**no**")]
            + budget_cells(t) for t in targets]
    return ["#### Real-torch targets\n"] + table(
        ["target", "where", "measured", "met", "budget ms", "floor ms", "reachable here"],
        "llllrrl", rows) + [
        "", "Over floor: the variant's median − the floor's median (same run). Paired: the "
            "median of the per-round differences from the floor, with a 95% bootstrap "
            "interval; within noise when it holds 0. Lazy's added cost is the in-process "
            "figure (above); a target on it is met when that is within budget and the "
            "whole-process interval's lower end is too; with fewer than "
            f"{MIN_JUDGE_ROUNDS} rounds (`--quick`) those targets are not judged. "
            "Floor under `full`: the bare cost of "
            "its stat calls (epload_bench BM_CacheStatBaseline, CPU time ÷ CPUs).\n"]


def plot(result, path):
    plot_marginals(path, result["sizes"], LABELS, "floor",
                   f"generated Python backends ({result['config']['import_cost_ms']:g} ms import "
                   f"each) among {result['config']['noise']:,} other distributions",
                   "cost over `import torch` with autoload off (ms, median)",
                   f"Real PyTorch {result['torch']['torch']}: what backends add to import torch "
                   f"(floor {fmt_ms(result['sizes'][-1]['stats']['floor']['median_ms'])} ms)")


def parse_args(argv):
    p = options.parser(PROG, __doc__, LABELS)
    options.add_common(p, rounds=(11, 3), warmup=(1, 0), python=None, least_rounds=2,
                       python_help="the torch venv's python (default: scripts/torch_env.py's)",
                       env_dir=options.KEPT)
    options.add_sizes(p, "10,100,1000", "generated Python backends; 0 = fixtures alone", 0, 20.0,
                      BREAK)
    p.add_argument("--fixtures", default=",".join(DEFAULT_FIXTURES),
                   help="fixture backends put on sys.path, in tests/torch/backends (%(default)s)")
    options.add_count(p, "--first-runs", (15, 3), "in-process runs")
    args = p.parse_args(argv)
    python, args.python = args.python, None  # the venv's, once the rest is checked
    args = options.finish(p, args)
    args.fixtures = [os.path.abspath(os.path.join(FIXTURE_DIR, d)) for d in
                     args.fixtures.split(",") if d.strip()]
    for d in args.fixtures:
        if not os.path.isdir(d):
            p.error(f"--fixtures: no directory {d}")
    try:
        args.python = python or torch_python(args.build, "bench_torch")
    except BenchError as e:
        p.error(str(e))
    if not os.access(args.python, os.X_OK):
        p.error(f"interpreter not found: {args.python}")
    args.python = os.path.abspath(args.python)  # a venv's python: never resolve the symlink
    return args


def measure_size(args, info, tmp, n):
    """One size verified, timed and measured in-process: (row, size)."""
    work = os.path.join(tmp, f"size-{n}")
    os.makedirs(work)
    manifest = None if n == 0 else kept_env(
        "bench_torch", "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK)
        else sys.executable, os.path.join(args.env_dir or os.path.join(tmp, "envs"),
                                          f"python-{n}-{args.noise}-cost{args.import_cost_ms:g}"),
        n, args.noise, GROUP, extra=("--import-cost-ms", args.import_cost_ms))
    size = Size(args, info, manifest, work)
    verified, raw = size.rounds("bench_torch", args, work)
    row = {"backends": n, "fixtures": len(size.fixtures),
           "distributions": n + (args.noise if n else 0), "stats": analyse(raw),
           "verified": {v: dict(r, attempts=tries) for v, (r, tries) in verified.items()},
           "commands": size.commands, "environments": {v: VARIANTS[v][1] for v in size.variants}}
    log(f"bench_torch: {n:,} backends: epload's own time in lazy processes, "
        f"{args.first_runs} runs ...")
    ip = size.in_process(args.first_runs)
    row["in_process"] = {"runs": args.first_runs, **{k: summarize(v) for k, v in ip.items()},
                         "total": summarize([a + b for a, b in zip(ip["pth"], ip["in_import"])])}
    return row, size


def first_use(args, size):
    """The IN_PROCESS timings at the largest size, interleaved."""
    log(f"bench_torch: first to({FOO!r}), in-process, {args.first_runs} pairs ...")
    raw = interleaved(size.timed, None, args.first_runs, 0, size.work, envs=size.timed_envs,
                      runner=lambda argv, env, _: {"ns": marked(argv, env, TIME_MARK)[0]})
    first = {"backends": size.n, "runs": args.first_runs, "commands": size.timed}
    for k, r in raw.items():
        s = first[k.replace("-", "_")] = summarize(r["ns"])
        first[k.replace("-", "_") + "_ms"] = s["median_ms"]
    return first


def run(args, tmp):
    # The fixtures are copied: their imports write __pycache__ there, not
    # into the source tree.
    fixtures = [os.path.join(tmp, "fixtures", os.path.basename(d)) for d in args.fixtures]
    for d, copy in zip(args.fixtures, fixtures):
        shutil.copytree(d, copy, ignore=shutil.ignore_patterns("__pycache__"))
    args.fixtures = fixtures
    info = describe_python(args.python, clean_env(tmp), args.fixtures)
    log(f"bench_torch: torch {info['torch']} in {info['torch_dir']}")
    result = {"config": config(args, sizes=args.sizes, noise=args.noise,
                               import_cost_ms=args.import_cost_ms, first_runs=args.first_runs),
              "torch": info, "sizes": []}
    for n in args.sizes:
        row, size = measure_size(args, info, tmp, n)
        result["sizes"].append(row)
    first = result["first_use"] = first_use(args, size)  # at the largest size
    stat_base = None if args.quick or n == 0 else stat_floor(
        "bench_torch", args.build, n + args.noise, clean_env(tmp), tmp, False)
    if stat_base:
        result["stat_baseline"] = stat_base
    result["targets"] = judge(result["sizes"], first, stat_base, args.rounds)
    write_report(result, markdown, args.md_out, args.json_out, args.plot, plot)
    return 0

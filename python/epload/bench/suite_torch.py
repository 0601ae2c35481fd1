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
from . import counts as counting
from .envs import SOURCE_DIR, clean_env, config, kept_env, launch, torch_python, user_env
from .proc import BenchError, capture, interleaved, log, marked, read_json
from .report import (TIMES, fmt_ms, load_average, table, times,
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
# The variants, in report order (Host.variants gives each its label,
# variables and body after `import HOST`).
ORDER = ("floor", "stock", "epload-eager", "epload-lazy", "epload-lazy-paths",
         "epload-lazy-dirty", "lazy-first-use", "by-hand")
EPLOAD_VARIANTS = ("epload-eager", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty",
                   "lazy-first-use")
# Variants that must import no backend (the device's provider included).
IMPORTS_NONE = ("floor", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty")
FIRST_USE = ("lazy-first-use", "by-hand")
# A variant whose own directory comes first on sys.path (a script's, as
# sys.path[0] is) and gets a new file before each run, untimed.
DIRTY = "epload-lazy-dirty"
LOADS_ALL = ("stock", "epload-eager")
# Timed inside the processes at the largest size, interleaved: name ->
# the variant whose variables and body are timed after `import HOST`.
IN_PROCESS = {"lazy": "lazy-first-use", "by-hand": "by-hand"}
# Test-only sabotage (--break-variant): name -> (variables added, body).
BREAK = {"stock": ({"EPLOAD_GEN_HOST": "no_such_host_module"}, None),
         "epload-eager": ({"EPLOAD_GEN_HOST": "no_such_host_module"}, None),
         "epload-lazy": ({"EPLOAD_MODE": "eager"}, None),
         "epload-lazy-paths": ({"EPLOAD_MODE": "eager"}, None),
         "by-hand": ({}, "import {module}; {use}")}
# The targets.
LAZY_FULL_MAX_PCT = 1.0     # lazy (`full`) at the largest size: at most 1% above the floor
STOCK_OVER_LAZY = 100.0     # stock's marginal ÷ lazy's, at RATIO_SIZE backends
RATIO_SIZE = 100
FIRST_USE_SLACK_MS = 1.0    # first use ≤ the provider's own import cost + 1 ms
# Fewer whole-process rounds give no interval worth a verdict: a target
# judged on whole-process differences alone is then reported, not judged
# (one on an in-process figure still is).
MIN_JUDGE_ROUNDS = 7
FIXTURE_DIR = os.path.join(SOURCE_DIR or "", "tests", "torch", "backends")
# The fixture backends that load cleanly under stock autoload; foo is the
# PrivateUse1 one (entry-point and device name).
DEFAULT_FIXTURES = ("common", "foo", "hook", "bar")
FOO = "foo"


class Host:
    """How the measured host is imported and autoloads its group: torch
    (TORCH_DEVICE_BACKEND_AUTOLOAD, its own loop), or another module MODULE,
    modelled as a host that loads nothing itself: its floor is `import
    MODULE`, its stock autoload PyTorch's loop over GROUP right after it."""

    def __init__(self, module="torch", group=GROUP):
        self.module, self.group = module, group
        self.torch = module == "torch"
        self.off = OFF if self.torch else {}
        hosts = module if group == GROUP else f"{module}={group}"
        self.lazy = {"EPLOAD_AUTOLOAD_HOSTS": hosts, "EPLOAD_MODE": "lazy"}
        self.stock_body = "" if self.torch else (
            f"import importlib.metadata as _m; [_e.load()() for _e in "
            f"_m.entry_points(group={group!r})]")
        # What the generated backends register their devices on.
        self.gen = {} if self.torch else {"EPLOAD_GEN_HOST": module}

    def use(self, device, generated):
        """(code, short text) of a first use of ``device``: a PrivateUse1
        device of torch by `to()`, else the attribute the backend set."""
        if self.torch and not generated:
            return f"x = torch.ones(2).to({device!r})", f'to("{device}")'
        return f"x = {self.module}.{device}", f"{self.module}.{device}"

    def variants(self, use, provider):
        """name -> (label, variables, body after `import MODULE`); ``use``
        None: no first-use variants; ``provider`` None: no by-hand one."""
        m, off, lazy = self.module, self.off, self.lazy
        floor = ("`import torch`, autoload off: the floor" if self.torch
                 else f"`import {m}`: the floor")
        stock = ("stock autoload (importlib.metadata, every backend)" if self.torch
                 else f"stock: PyTorch's loop over {self.group} after `import {m}`")
        out = {"floor": (floor, off, ""),
               "stock": (stock, {}, self.stock_body),
               "epload-eager": ("epload eager", dict(lazy, EPLOAD_MODE="eager"), ""),
               "epload-lazy": ("epload lazy, `full`", lazy, ""),
               "epload-lazy-paths": ("epload lazy, `paths`", dict(lazy, EPLOAD_VALIDATE="paths"),
                                     ""),
               "epload-lazy-dirty": ("epload lazy, `full`, script's directory changed before "
                                     "each run", lazy, "")}
        if use:
            out["lazy-first-use"] = (f"epload lazy + first `{use[1]}`", lazy, use[0])
            if provider:
                out["by-hand"] = (f"{'autoload off, ' if self.torch else ''}{provider[0]} by "
                                  f"hand + `{use[1]}`", off, "{call}; " + use[0])
        return out


DESCRIBE = """import json, os, sys, importlib.metadata as m, importlib.util as u
sys.path += {fixtures!r}
import {host} as _h
eps = [[e.name, e.value, e.dist.name if e.dist else None]
       for e in m.entry_points(group={group!r})]
ep = u.find_spec('epload')
hook = [os.path.join(p, 'epload-autoload.pth') for p in sys.path
        if os.path.isfile(os.path.join(p, 'epload-autoload.pth'))]
print(json.dumps({{'torch': str(getattr(_h, '__version__', '?')),
                  'torch_dir': os.path.dirname(getattr(_h, '__file__', None) or '?'),
                  'host': {host!r}, 'group': {group!r},
                  'python': sys.version.split()[0], 'executable': sys.executable,
                  'prefix': sys.prefix, 'epload': ep.origin if ep else None,
                  'hook': hook[0] if hook else None, 'backends': eps}}))
"""


def describe_python(python, env, fixtures, host=None, pycache=None, inherit=False):
    """The host's version and location, epload's, the hook, and the backends."""
    host = host or Host()
    off = dict(env, **host.off)
    x = ["-X", f"pycache_prefix={pycache}"] if pycache else []
    flags, prefix = launch(inherit)
    try:
        proc = capture([python, *flags, *x, "-c", prefix + DESCRIBE.format(
            fixtures=fixtures, host=host.module, group=host.group)], off)
    except BenchError as err:
        if host.torch:
            raise BenchError(f"{python} cannot `import torch`: {err}\nThe harness needs a venv "
                             "with torch==2.13.0, epload and the fixture backends (see --help)")
        raise BenchError(f"{python} cannot `import {host.module}` (the --host): {err}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    if not info["epload"]:
        raise BenchError(f"{python}: epload is not installed in it")
    if not info["hook"]:
        raise BenchError(f"{python}: epload-autoload.pth is not on its sys.path (epload's "
                         ".pth hook): EPLOAD_AUTOLOAD_HOSTS would do nothing")
    return info


PROBE = ("\nimport json as _j\n"
         "_t = sys.modules.get({host!r})\n"
         "_x = globals().get('x')\n"
         "_r = {{'modules': sum(1 for k in list(sys.modules) if k.startswith('gen_backend_')),\n"
         "      'devices': sum(1 for k in list(vars(_t)) if k.startswith('dev')"
         " and k[3:].isdigit()),\n"
         "      'provider': {module!r} in sys.modules,\n"
         "      'epload': 'epload' in sys.modules,\n"
         "      'x': None if _x is None else ([_x.device.type, _x.cpu().tolist()]"
         " if hasattr(_x, 'cpu') else type(_x).__name__)}}\n"
         f"print({VERIFY_MARK!r} + _j.dumps(_r))\n")


def first_device(args, fixtures, manifest):
    """(device, generated, provider (name, module, attr) or None) of the
    first use measured, or Nones: args.device (a fixture's entry point of
    that name, or a generated backend's device), else the middle generated
    backend's device when args.device is "auto"."""
    device = args.device
    backends = manifest["backends"] if manifest else []
    if device == "auto":
        if not backends:
            return None, False, None
        device = backends[len(backends) // 2]["device"]
    if not device:
        return None, False, None
    gen = next((b for b in backends if b["device"] == device), None)
    if gen:
        return device, True, (gen["entry_point"], gen["package"], "_autoload")
    ep = next((b for b in fixtures if b[0] == device), None)
    if ep:
        module, _, attr = (x.strip() for x in ep[1].partition(":"))
        return device, False, (ep[0], module, attr)
    return device, False, None


class Size(Variants):
    """The variants at one size (``manifest`` None: the installed backends
    and fixtures alone)."""

    # The first run is lazy, as a user's first lazy run: it loads every
    # backend whose devices are not known yet and learns them (foo's too).
    mark, warm, retried = VERIFY_MARK, ("epload-lazy",), EPLOAD_VARIANTS

    def __init__(self, args, info, manifest, work):
        self.python, self.work = args.python, work
        self.host = host = getattr(args, "host_model", None) or Host()
        self.inherit = getattr(args, "inherit", False)
        self.flags, self.prefix = launch(self.inherit)
        self.base = dict(user_env(work) if self.inherit else clean_env(work), **host.gen)
        self.paths = args.fixtures + ([manifest["search_path"]] if manifest else [])
        self.n = len(manifest["backends"]) if manifest else 0
        self.where = f"{self.n:,} generated backends"
        self.fixtures = info["backends"]
        self.device, generated, provider = first_device(args, self.fixtures, manifest)
        if args.device and args.device != "auto" and self.device and not generated \
                and not provider and not host.torch:
            raise BenchError(f"--device {args.device}: no backend provides it (no entry point "
                             f"of {host.group} is named so, nor a generated device)")
        if args.device == FOO and provider is None and args.require_device:
            raise BenchError(f"the venv holds no torch.backends entry point named {FOO!r} "
                             f"(found: {', '.join(b[0] for b in self.fixtures) or 'none'}); "
                             "install the fixture backends of tests/torch/backends")
        self.generated, self.provider = generated, provider
        use = host.use(self.device, generated) if self.device else None
        self.use = use
        table = host.variants(use, provider)
        if not args.dirty:
            table.pop(DIRTY)
        self.table = table
        self.labels = {v: x[0] for v, x in table.items()}
        self.variants = list(table)
        module = provider[1] if provider else None
        self.provider_module = module
        fmt = {"module": module, "use": use[0] if use else "",
               "call": (f"from {module} import {provider[2]} as _f; _f()" if provider[2]
                        else f"import {module}") if provider else ""}
        self.code = {v: (f"import {host.module}; " + b.format(**fmt)).rstrip("; ")
                     for v, (_, _, b) in table.items()}
        # A training script's outputs or an editor's save change the
        # directory; that entry is listed again, the index must still hit.
        # Every variant has a script's directory first on sys.path, as a
        # script has (each of the host's imports looks there first): the others
        # one that never changes, so that DIRTY differs from them, the floor
        # included, only in that its directory changed.
        self.script_dir, self.outputs = os.path.join(work, "script-dir"), 0
        quiet_dir = os.path.join(work, "script-dir-quiet")
        for d in (self.script_dir, quiet_dir):
            os.makedirs(d)
        for v in self.code:
            first = self.script_dir if v == DIRTY else quiet_dir
            self.code[v] = f"sys.path.insert(0, {first!r}); " + self.code[v]
        self.envs = {v: dict(self.base, **table[v][1]) for v in self.variants}
        if args.break_variant and args.break_variant in table:
            more, body = BREAK[args.break_variant]
            self.envs[args.break_variant].update(more)
            if body:
                self.code[args.break_variant] = f"import {host.module}; " + body.format(**fmt)
        self.pycache = getattr(args, "pycache", None)
        self.commands = {v: self.argv(self.code[v]) for v in self.variants}
        timed = (f"import {host.module}; import time as _t; _t0 = _t.perf_counter_ns(); "
                 "{work}; " f"print({TIME_MARK!r} + str(_t.perf_counter_ns() - _t0))")
        self.timed = {k: self.argv(timed.format(work=table[v][2].format(**fmt)))
                      for k, v in IN_PROCESS.items() if v in table}
        self.timed_envs = {k: dict(self.base, **table[v][1]) for k, v in IN_PROCESS.items()
                           if v in table}
        # Untimed work before each run of a variant (name -> callable).
        self.before = {DIRTY: self.touch_script_dir} if DIRTY in table else {}
        self.probe = PROBE.format(host=host.module, module=module)

    def touch_script_dir(self):
        self.outputs += 1
        with open(os.path.join(self.script_dir, f"out-{self.outputs}.log"), "w") as f:
            f.write("step\n")

    def argv(self, body, suffix="", before=""):
        x = ["-X", f"pycache_prefix={self.pycache}"] if self.pycache else []
        return [self.python, *self.flags, *x, "-c", f"{before}{self.prefix}import sys; "
                f"sys.path += {self.paths!r}; {body}{suffix}"]

    def counts(self, method):
        """Each variant's counted work in one more run (counts.py)."""
        out = {}
        for v in self.variants:
            if v in self.before:
                self.before[v]()
            out[v] = counting.count(lambda pro, epi: self.argv(self.code[v], epi, pro),
                                    self.envs[v], self.work, method)
        return out

    def probe_run(self, v):
        env = dict(self.envs[v], **({"EPLOAD_DEBUG": "1"} if v in EPLOAD_VARIANTS else {}))
        return self.argv(self.code[v], self.probe), env

    def problems(self, v, r, stderr):
        n, out, host = self.n, [], self.host.module
        mine = self.provider_module
        if v in LOADS_ALL:
            if r["modules"] != n or r["devices"] != n:
                out.append(f"imported {r['modules']} of the {n} generated backends, "
                           f"{r['devices']} device attributes on {host}")
            if mine and not self.generated and not r["provider"]:
                out.append(f"did not import {mine}")
        elif v in FIRST_USE and self.generated:
            if r["modules"] != 1 or not r["provider"]:
                out.append(f"imported {r['modules']} generated backend(s), "
                           f"{mine + ' among them' if r['provider'] else 'not ' + str(mine)}; "
                           "expected that one alone")
        elif r["modules"] or r["devices"]:
            out.append(f"imported {r['modules']} generated backend(s) ({r['devices']} device "
                       f"attributes on {host}); expected none")
        if v in IMPORTS_NONE and mine and r["provider"]:
            out.append(f"imported {mine}; expected not")
        if v in FIRST_USE and self.host.torch and not self.generated and (
                r["x"] is None or r["x"][0] != self.device or r["x"][1] != [1.0, 1.0]):
            out.append(f"torch.ones(2).to({self.device!r}) gave {r['x']}")
        if v in FIRST_USE and r["x"] is None:
            out.append(f"`{self.use[1]}` gave nothing")
        if (v in EPLOAD_VARIANTS) != r["epload"]:
            out.append("imported epload" if r["epload"] else "did not import epload")
        return out + (index_hit(stderr) if v in EPLOAD_VARIANTS else [])

    def in_process(self, runs):
        """Per run (ns): the .pth hook's import and epload's share of `import HOST`."""
        out = {"pth": [], "import_torch": [], "in_import": []}
        env = self.envs["epload-lazy"]
        host = self.host.module
        for k in range(runs):
            proc = capture([self.python, "-X", "importtime"] + self.argv("pass")[1:], env)
            out["pth"].append(hook_import_ns(proc.stderr))
            path = os.path.join(self.work, f"lazy-trace-{k}.json")
            capture(self.commands["epload-lazy"], dict(env, EPLOAD_TRACE=path))
            whole, added = epload_share(path, host)
            out["import_torch"].append(whole)
            out["in_import"].append(added)
        return out

def epload_share(trace_path, host="torch"):
    """(the `import HOST` span, that less "body of HOST") of a trace, ns."""
    events = [e for e in read_json(trace_path)["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "total"]
    spans = {}
    for name in (f"import {host}", f"body of {host}"):
        found = [e for e in events if e["name"] == name]
        if len(found) != 1:
            raise BenchError(f"{trace_path}: {len(found)} `{name}` spans, not one (an epload "
                             "without the host-body span?)")
        spans[name] = found[0]["dur"]
    whole, body = spans[f"import {host}"], spans[f"body of {host}"]
    return int(whole * 1e3), int((whole - body) * 1e3)


def hook_import_ns(importtime_stderr, missing=None):
    """``epload._hook``'s cumulative -X importtime, ns (else ``missing``)."""
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == "epload._hook":
            return int(line.split("|")[1]) * 1000
    if missing is not None:
        return missing
    raise BenchError("no `epload._hook` import in -X importtime's output: is the .pth hook "
                     "installed and EPLOAD_AUTOLOAD_HOSTS set?\n" + importtime_stderr[-500:])


def analyse(raw, counted=None):
    stats = summarize_rounds(raw, reference="floor")
    f = stats["floor"]["median_ms"]
    for v, s in stats.items():
        s["marginal_pct"] = 100.0 * s["marginal_ms"] / f
        if v != "floor":
            s["paired"] = paired_ci(raw[v]["wall"], raw["floor"]["wall"])
            s["paired_cpu"] = paired_ci(raw[v]["cpu"], raw["floor"]["cpu"])
            # Fewer pairs than a verdict needs: the interval is not shown as one.
            for p in (s["paired"], s["paired_cpu"]):
                p["pairs"] = len(raw[v]["wall"])
                if p["pairs"] < MIN_JUDGE_ROUNDS:
                    p["within_noise"] = None
        if counted and v in counted:
            s["counts"] = counted[v]
    return stats


def whole_process(stats):
    p = stats["paired"]
    if too_few(p):
        return (f"whole process {p['median_ms']:+.1f} ms ({p['pairs']} pairs: too few for "
                "an interval)")
    return (f"whole process {p['median_ms']:+.1f} ms, 95% CI [{p['ci95_ms'][0]:+.1f}, "
            f"{p['ci95_ms'][1]:+.1f}]")


def where(r):
    return f"{r['backends']:,} generated backends, {r['distributions']:,} distributions"


def target(text, measured, met, at, budget_ms=None, floor=None, unjudged=None):
    """A target: its verdict ``met`` (True, False, None: not judged, why)."""
    t = {"target": text, "where": at, "measured": measured, "met": met}
    if budget_ms is not None:
        budget_floor(t, budget_ms, floor)
    if met is None:
        t["unjudged"] = unjudged or "not judged"
    return t


def whole_only(t, rounds):
    """A target judged on whole-process differences alone: not judged below
    MIN_JUDGE_ROUNDS rounds."""
    if rounds < MIN_JUDGE_ROUNDS and t["met"] is not None:
        t.update(met=None, unjudged=f"not judged: {rounds} rounds of whole processes "
                                    f"(needs ≥ {MIN_JUDGE_ROUNDS})")
    return t


def lazy_added(row, pct, rounds, text, floor=None):
    """epload lazy's added cost (in-process, `full`) ≤ ``pct``% of the floor
    at ``row``; with ≥ MIN_JUDGE_ROUNDS rounds the whole-process interval's
    lower end must be within the budget too."""
    st, added = row["stats"], row["in_process"]["total"]["median_ms"]
    floor_ms, lazy = st["floor"]["median_ms"], st["epload-lazy"]
    budget = floor_ms * pct / 100
    met = added <= budget
    note = ""
    if rounds >= MIN_JUDGE_ROUNDS:
        met = met and lazy["paired"]["ci95_ms"][0] <= budget
    else:
        note = f" (whole-process check skipped: {rounds} rounds)"
    return dict(target(text, f"in-process {added:.2f} ms ({100 * added / floor_ms:.2f}% of "
                             f"the floor's {fmt_ms(floor_ms)} ms); " + whole_process(lazy) + note,
                       met, where(row), budget, floor), rule="in-process")


def lazy_whole(row, pct, rounds, quick, text):
    """The wall-time gate: epload lazy's (`full`) whole-process added cost,
    the paired interval against ``pct``% of the floor; fails only when the
    whole interval is over it; never judged from fewer than MIN_JUDGE_ROUNDS
    pairs, nor under --quick (it reports)."""
    st = row["stats"]
    floor_ms, lazy = st["floor"]["median_ms"], st["epload-lazy"]
    budget = floor_ms * pct / 100
    p, ip = lazy["paired"], row["in_process"]["total"]["median_ms"]
    measured = (whole_process(lazy) + f" against {budget:.1f} ms ({pct:g}% of the floor's "
                f"{fmt_ms(floor_ms)} ms); in-process {ip:.2f} ms")
    t = dict(target(text, measured, p["ci95_ms"][0] <= budget, where(row), budget), rule="whole")
    if quick:
        t.update(met=None, unjudged="reported, not judged (--quick)", reported=True)
    elif p.get("pairs", rounds) < MIN_JUDGE_ROUNDS:
        t.update(met=None, unjudged=f"not judged: {p.get('pairs', rounds)} pairs "
                                    f"(needs ≥ {MIN_JUDGE_ROUNDS})")
    return t


def judge(sizes, first, stat_base, rounds):
    """The real-torch targets, each with its budget (see targets_table)."""
    big = max(sizes, key=lambda r: (r["distributions"], r["backends"]))
    st = big["stats"]

    def low(s):  # the lower end of a variant's paired interval
        return s["paired"]["ci95_ms"][0]
    paths, dirty = st["epload-lazy-paths"], st.get(DIRTY)
    out = [lazy_added(big, LAZY_FULL_MAX_PCT, rounds,
                      f"lazy `import torch` (`full`) ≤ {LAZY_FULL_MAX_PCT:g}% above the floor",
                      stat_base["floor_ms"] if stat_base else None),  # full's stat calls, bare
           # No cost detectable above the floor: the interval reaches 0 or
           # below (wholly below is drift between rounds, not a gain).
           whole_only(target("lazy `import torch` (`paths`) within noise of the floor",
                             whole_process(paths), low(paths) <= 0, where(big)), rounds)]
    ratio = f"stock's added cost ÷ lazy's ≥ {STOCK_OVER_LAZY:g}×"
    row = next((r for r in sizes if r["backends"] == RATIO_SIZE), None)
    if row is None:
        out.append(target(f"{ratio} at {RATIO_SIZE} backends", "n/a", None,
                          "not measured (size absent)", unjudged="not measured"))
    else:
        stock = row["stats"]["stock"]
        added, gain = row["in_process"]["total"]["median_ms"], stock["paired"]["median_ms"]
        r, ci = gain / added if added else None, stock["paired"]["ci95_ms"]
        need = added * STOCK_OVER_LAZY
        # Judged when stock's interval lies wholly on one side of the budget.
        met = None if r is None else (True if ci[0] >= need else False if ci[1] < need else None)
        out.append(target(
            ratio, (f"{r:,.0f}×: stock {gain:+,.0f} ms (paired, 95% CI [{ci[0]:+,.0f}, "
                    f"{ci[1]:+,.0f}]) ÷ lazy in-process {added:.2f} ms" if r else "in-process n/a"),
            met, where(row), need, unjudged=f"not judged: stock's interval holds "
                                            f"{STOCK_OVER_LAZY:g}× lazy's ({need:,.0f} ms): "
                                            "more rounds"))
    if first and "by_hand_ms" in first:
        lz, bh = first["lazy_ms"], first["by_hand_ms"]
        out.append(target(f"first `{first['use']}` ≤ {first['provider']}'s own import cost + "
                          f"{FIRST_USE_SLACK_MS:g} ms",
                          f"{lz:.2f} ms against {bh:.2f} ms by hand ({lz - bh:+.2f} ms)",
                          lz <= bh + FIRST_USE_SLACK_MS, where(big) + ", in-process",
                          bh + FIRST_USE_SLACK_MS))
    if dirty is not None:
        # A whole-process figure: the in-process share is the lazy one's
        # plus the listing of the changed script's directory.
        budget = st["floor"]["median_ms"] * LAZY_FULL_MAX_PCT / 100
        out.append(whole_only(target(
            "lazy `import torch` (`full`), script's directory changed before each run, "
            f"≤ {LAZY_FULL_MAX_PCT:g}% above the floor", whole_process(dirty),
            low(dirty) <= budget, where(big), budget), rounds))
    return out


def too_few(p):
    """True when a paired figure has fewer pairs than an interval needs."""
    return p.get("pairs", MIN_JUDGE_ROUNDS) < MIN_JUDGE_ROUNDS


def interval(p, noise=True):
    if p is None:
        return ""
    if too_few(p):
        return f"{p['median_ms']:+.2f} ({p['pairs']} pairs: no interval)"
    return (f"{p['median_ms']:+.2f} [{p['ci95_ms'][0]:+.2f}, {p['ci95_ms'][1]:+.2f}]"
            + (" within noise" if noise and p["within_noise"] else ""))


def verdict(t):
    """"met" / "NOT MET" / why not judged."""
    return t.get("unjudged", "not judged") if t["met"] is None else (
        "met" if t["met"] else "NOT MET")


def headline(targets):
    """One sentence per target, verdict first: the report's opening."""
    if not targets:
        return ["No target was set: nothing judged.\n"]
    return [f"- **{verdict(t)}**: {t['target'].rstrip('.')} ({t['where']}): {t['measured']}."
            for t in targets] + [""]


def host_name(result):
    info = result["torch"]
    return info.get("host", "torch")


def markdown(result):
    cfg, info = result["config"], result["torch"]
    host = host_name(result)
    sizes = ", ".join(f"{n:,}" for n in cfg["sizes"])
    what = (f"Real PyTorch {info['torch']}: `import torch`" if host == "torch"
            else f"`import {host}` ({info['torch']}), group `{info.get('group', GROUP)}`")
    among = (f"among {cfg['distributions']:,} generated distributions"
             if cfg.get("distributions") is not None
             else f"among {cfg['noise']:,} ordinary distributions")
    L = [f"### {what} with {sizes} generated backends {among}\n" if cfg["sizes"] != [0]
         else f"### {what} with the installed backends\n"] + headline(result["targets"])
    fixtures = ", ".join(b[0] for b in info["backends"]) or "none"
    L += [f"`{host}` {info['torch']} from `{info['torch_dir']}` (Python {info['python']}, "
          f"`{cfg['python']}`); epload from `{info['epload']}`; installed backends: "
          f"{fixtures}. Each generated backend's import "
          f"burns {cfg['import_cost_ms']:g} ms. {cfg['rounds']} interleaved rounds after "
          f"{cfg['warmup']} warm-up, whole-process medians; {cfg['machine']['cpus']} CPUs, "
          f"{load_average(cfg)}.\n"] + environment_lines(result.get("environment"))
    for row in result["sizes"]:
        labels = row.get("labels", {})
        rows = [[labels.get(v, v)] + times(s)
                + (["", ""] if v == "floor" else [fmt_ms(s["marginal_ms"]),
                                                  f"{s['marginal_pct']:+.2f}%" + (
                                                      " (noise)" if s["paired"]["within_noise"]
                                                      else "")])
                + [interval(s.get("paired")), interval(s.get("paired_cpu"), False)]
                for v in ORDER if (s := row["stats"].get(v))]
        L += [f"#### Whole processes: {row['backends']:,} generated backends + "
              f"{row['fixtures']} installed ({row['distributions']:,} distributions)\n"] + table(
            ["variant", *TIMES, "over floor ms", "over floor %",
             "paired median ms [95% CI]", "CPU over floor ms [95% CI]"], "lrrrrrll", rows) + [""]
        L += counts_table(row)
    f = result.get("first_use")
    if f:
        rows = [[what, f"{f[k]['median_ms']:.2f}", f"{f[k]['q1_ms']:.2f}–{f[k]['q3_ms']:.2f}"]
                for k, what in (("lazy", f"lazy: the first `{f['use']}` (imports "
                                         f"{f['provider']})"),
                                ("by_hand", f"{f['provider']}'s entry point by hand, then "
                                            f"`{f['use']}`")) if k in f]
        L += [f"#### First `{f['use']}`, in-process ({f['runs']} pairs, "
              f"{f['backends']:,} generated backends)\n"] + table(
            ["process", "median ms", "IQR ms"], "lrr", rows) + [""]
    return "\n".join(L + in_process_table(result["sizes"], host)
                     + targets_table(result["targets"])) + "\n"


def environment_lines(env):
    """What the processes inherited and what the bench set itself."""
    if not env:
        return []
    if env["mode"] == "clean":
        return ["Environment: clean (`--clean-env`): each process ran `python -I` with only "
                f"{', '.join(f'`{k}`' for k in env['inherited'])}; `PYTHONPATH`, "
                "`LD_LIBRARY_PATH` and the user site-packages were not seen.\n"]
    names = ", ".join(f"`{k}`" for k in env["inherited"]) or "none"
    return [f"Environment: yours, inherited (names only): {names}. Set by the bench: "
            f"{', '.join(f'`{k}`' for k in env['set'])} (per variant), `XDG_CACHE_HOME` "
            "(its own cache directory, removed at the end); the working directory kept off "
            "`sys.path` (`-P`).\n"]


def counts_table(row):
    """Each variant's counted work (counts.py), when counted."""
    rows = [[row.get("labels", {}).get(v, v)] + [f"{c[k]:,}" for k in (*counting.GATED,
                                                                        "bytes_read")]
            for v in ORDER if (c := row["stats"].get(v, {}).get("counts"))]
    if not rows:
        return []
    method = next(c["counts"]["method"] for c in row["stats"].values() if "counts" in c)
    how = ("`strace -f -c`: the kernel's calls, every thread" if method == "strace" else
           "Python-level calls only (no strace here): C code's calls are not in them")
    return [f"#### Counted work, one warm run each: {row['backends']:,} generated backends\n"
            ] + table(["variant", "modules", "shared objects", "stat calls", "open calls",
                       "bytes read"], "lrrrrr", rows) + [
        f"\nModules: `sys.modules` at the end; shared objects: files mapped (`/proc/self/maps`), "
        f"the dynamic loader's included; bytes read: `/proc/self/io`; stat and open calls: {how}. "
        "Counts do not wander with the load as times do.\n"]


def in_process_table(sizes, host="torch"):
    """What lazy epload adds, measured inside its processes, per size."""
    rows = [[f"{r['backends']:,}", str(ip["runs"]), fmt_ms(ip["import_torch"]["median_ms"]),
             f"{ip['pth']['median_ms']:.2f}", f"{ip['in_import']['median_ms']:.2f}",
             f"{t['median_ms']:.2f} ({t['q1_ms']:.2f}–{t['q3_ms']:.2f})",
             f"{100 * t['median_ms'] / r['stats']['floor']['median_ms']:.2f}%"]
            for r in sizes for ip, t in [(r["in_process"], r["in_process"]["total"])]]
    return ["#### Inside the processes: what lazy epload adds (not comparable with the "
            "whole-process differences above)\n"] + table(
        ["generated backends", "runs", f"`import {host}` ms", ".pth hook's import ms",
         f"added inside `import {host}` ms", "epload in all, ms (IQR)", "% of the floor"],
        "rrrrrlr", rows) + [
        "\nThe .pth hook's import: `-X importtime`'s cumulative time of `epload._hook` "
        f"at interpreter start. Added inside `import {host}`: the trace's (EPLOAD_TRACE) "
        f"`import {host}` span less the host's own body (`body of {host}`): epload's "
        "imports, its native module, discovery, matching, and the loads of backends that "
        "declare no device (they run at import even in lazy mode). "
        "In all: the median of the per-run sums.\n"]


def targets_table(targets):
    """The targets with their budgets and floors."""
    if not targets:
        return []
    rows = [[t["target"], t["where"], t["measured"],
             t.get("unjudged", "n/a") if t["met"] is None else ("yes" if t["met"] else "**no**")]
            + budget_cells(t) for t in targets]
    return ["#### Targets\n"] + table(
        ["target", "where", "measured", "met", "budget ms", "floor ms", "reachable here"],
        "llllrrl", rows) + [
        "", "Over floor: the variant's median − the floor's median (same run); (noise): its "
            "paired interval holds 0, the difference is not measurable. Paired: the "
            "median of the per-round differences from the floor, with a 95% bootstrap "
            f"interval, shown from {MIN_JUDGE_ROUNDS} pairs; within noise when it holds 0. "
            + " ".join(dict.fromkeys(RULES[t["rule"]] for t in targets if t.get("rule")))
            + f" A target on whole-process differences needs {MIN_JUDGE_ROUNDS} pairs "
            "(not `--quick`: it reports, never judges)."
            + (" Floor under `full`: the bare cost of its stat calls (the checkout's "
               "epload_bench BM_CacheStatBaseline, CPU time ÷ CPUs)."
               if any("floor_ms" in t for t in targets) else "") + "\n"]


# How each kind of target is judged, for the note under the targets table.
RULES = {
    "in-process": "A target on lazy's in-process added cost is met when that is within budget "
                  f"and, with {MIN_JUDGE_ROUNDS} rounds or more, the whole-process interval's "
                  "lower end is too.",
    "whole": "A wall-time gate on lazy's whole-process added cost fails only when the whole "
             "interval is over its budget (met when any of it is within).",
    "regression": "A regression target compares lazy's in-process added cost with the "
                  "baseline's at the same size.",
    "counts": "A count target fails when a count of a lazy variant grew over the baseline's "
              "(counts are exact: no interval).",
}


def plot(result, path):
    from .plot import plot_costs
    plot_costs(result, path)


def parse_args(argv):
    host = Host()
    p = options.parser(PROG, __doc__, {v: x[0] for v, x in host.variants(
        host.use(FOO, False), (FOO, FOO, "")).items()})
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
    if not SOURCE_DIR:
        p.error("needs a checkout of epload (its fixture backends); installed, run "
                "`python -m epload.bench`")
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
    args.device, args.require_device, args.dirty, args.host_model = FOO, True, True, Host()
    args.prog = "bench_torch"
    return args


def measure_size(args, info, tmp, n, noise=None):
    """One size verified, timed and measured in-process: (row, size)."""
    prog = getattr(args, "prog", "bench_torch")
    noise = args.noise if noise is None else noise
    work = os.path.join(tmp, f"size-{n}")
    os.makedirs(work)
    group = (getattr(args, "host_model", None) or Host()).group
    manifest = None if n == 0 else kept_env(
        prog, "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK)
        else sys.executable, os.path.join(args.env_dir or os.path.join(tmp, "envs"),
                                          f"python-{n}-{noise}-cost{args.import_cost_ms:g}"),
        n, noise, group, extra=("--import-cost-ms", args.import_cost_ms))
    size = Size(args, info, manifest, work)
    verified, raw = size.rounds(prog, args, work)
    counted = None
    if getattr(args, "count_method", None):
        log(f"{prog}: {n:,} backends: counting each variant's work ({args.count_method}) ...")
        counted = size.counts(args.count_method)
    row = {"backends": n, "fixtures": len(size.fixtures),
           "distributions": n + (noise if n else 0), "stats": analyse(raw, counted),
           "verified": {v: dict(r, attempts=tries) for v, (r, tries) in verified.items()},
           "labels": size.labels, "device": size.device,
           "commands": size.commands, "environments": {v: size.table[v][1]
                                                       for v in size.variants}}
    log(f"{prog}: {n:,} backends: epload's own time in lazy processes, "
        f"{args.first_runs} runs ...")
    ip = size.in_process(args.first_runs)
    row["in_process"] = {"runs": args.first_runs, **{k: summarize(v) for k, v in ip.items()},
                         "total": summarize([a + b for a, b in zip(ip["pth"], ip["in_import"])])}
    return row, size


def first_use(args, size):
    """The IN_PROCESS timings at the largest size, interleaved; None
    without a device."""
    if not size.timed:
        return None
    prog = getattr(args, "prog", "bench_torch")
    log(f"{prog}: first `{size.use[1]}`, in-process, {args.first_runs} runs each ...")
    raw = interleaved(size.timed, None, args.first_runs, 0, size.work, envs=size.timed_envs,
                      runner=lambda argv, env, _: {"ns": marked(argv, env, TIME_MARK)[0]})
    first = {"backends": size.n, "runs": args.first_runs, "commands": size.timed,
             "use": size.use[1], "device": size.device,
             "provider": size.provider[0] if size.provider else size.device}
    for k, r in raw.items():
        s = first[k.replace("-", "_")] = summarize(r["ns"])
        first[k.replace("-", "_") + "_ms"] = s["median_ms"]
    return first


def copy_fixtures(args, tmp):
    """The fixtures are copied: their imports write __pycache__ there, not
    into the source tree."""
    fixtures = [os.path.join(tmp, "fixtures", os.path.basename(d)) for d in args.fixtures]
    for d, copy in zip(args.fixtures, fixtures):
        shutil.copytree(d, copy, ignore=shutil.ignore_patterns("__pycache__"))
    args.fixtures = fixtures


def measure(args, tmp, noise_of=None):
    """Every size, then the first use at the largest: the result (no targets)."""
    host = args.host_model
    inherit = getattr(args, "inherit", False)
    info = describe_python(args.python, user_env(tmp) if inherit else clean_env(tmp),
                           args.fixtures, host, getattr(args, "pycache", None), inherit)
    if getattr(args, "check_info", None):  # before anything is measured
        args.check_info(info)
    log(f"{args.prog}: {host.module} {info['torch']} in {info['torch_dir']}")
    result = {"config": config(args, sizes=args.sizes, noise=args.noise,
                               import_cost_ms=args.import_cost_ms, first_runs=args.first_runs),
              "torch": info, "sizes": []}
    for n in args.sizes:
        row, size = measure_size(args, info, tmp, n, noise_of(n) if noise_of else None)
        result["sizes"].append(row)
    result["first_use"] = first_use(args, size)  # at the largest size
    return result, n


def run(args, tmp):
    copy_fixtures(args, tmp)
    result, n = measure(args, tmp)
    stat_base = None if args.quick or n == 0 else stat_floor(
        "bench_torch", args.build, n + args.noise, clean_env(tmp), tmp, False)
    if stat_base:
        result["stat_baseline"] = stat_base
    result["targets"] = judge(result["sizes"], result["first_use"], stat_base, args.rounds)
    write_report(result, markdown, args.md_out, args.json_out, args.plot, plot)
    return 0

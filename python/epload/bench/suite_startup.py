"""Whole-process start-up harness for Python backends: what a program pays at
start for its plugin backends, with and without epload.

Per --sizes, whole `python3 -I -S -c` processes, verified, interleaved:
{listing}
Method: BENCHMARKS.md.
"""

from __future__ import annotations

import glob
import os
import sys

from . import options
from . import stock_autoload  # also the Python tests' oracle
from .envs import clean_env, config, kept_env, stevedore_location, stevedore_lookup
from .proc import extra_passes, progress_line
from .report import (SYSCALL_COLUMNS, TIMES, fmt_ms, fmt_ratio, load_average, plot_marginals,
                     syscall_cells, table, times, write_report)
from .stats import ratio, summarize_rounds
from .targets import budget_cells, budget_floor, stat_floor
from .verify import Variants, index_hit


PROG = "bench_startup.py"
GROUP = "torch.backends"
HOST = "torch"
HOST_SWITCH = "EPLOAD_BENCH_HOST_AUTOLOAD"  # the fixture host: "pytorch" (default) or "epload"
VERIFY_MARK = "EPLOAD-BENCH-VERIFY "
EP = "import epload; eps = epload.entry_points(group={g!r})"
EPLOAD_HOST = {HOST_SWITCH: "epload"}

# The variants, in report order: name -> (label, kind, variables, measured statement).
# The statement's {g} is the group, {floor} build/bench, {stevedore} the lookup,
# {first} the device of the middle backend.
VARIANTS = {
    "bare": ("bare interpreter (`python3 -I -S`)", "bare", {}, ""),
    "importlib": ("importlib.metadata `entry_points(group=)`", "lookup", {},
                  "from importlib.metadata import entry_points; eps = entry_points(group={g!r})"),
    "stevedore": ("stevedore cached `get_group_all`", "lookup", {}, "{stevedore}"),
    "pytorch-eager": ("PyTorch-style eager autoload (`import torch`)", "eager", {},
                      f"import {HOST}"),
    "floor-native": ("floor: empty module linked like `epload._native`", "floor", {},
                     "sys.path.insert(0, {floor!r}); import _epload_floor"),
    "epload-import": ("`import epload`", "import", {}, "import epload"),
    "epload-ep": ("epload `entry_points(group=)`, `full`", "lookup", {}, EP),
    "epload-ep-paths": ("epload `entry_points(group=)`, `paths`", "lookup",
                        {"EPLOAD_VALIDATE": "paths"}, EP),
    "epload-eager": ("epload eager autoload", "eager", dict(EPLOAD_HOST, EPLOAD_MODE="eager"),
                     f"import {HOST}"),
    "epload-lazy": ("epload lazy autoload, nothing used", "lazy",
                    dict(EPLOAD_HOST, EPLOAD_MODE="lazy"), f"import {HOST}"),
    "epload-lazy-paths": ("epload lazy autoload, `paths`", "lazy",
                          dict(EPLOAD_HOST, EPLOAD_MODE="lazy", EPLOAD_VALIDATE="paths"),
                          f"import {HOST}"),
    "epload-lazy-first": ("epload lazy + first device", "first",
                          dict(EPLOAD_HOST, EPLOAD_MODE="lazy"),
                          f"import {HOST}; dev = {HOST}.{{first}}"),
}
REFERENCES = {"importlib": "importlib", "stevedore": "stevedore", "pytorch-eager": "PyTorch-eager"}
# The targets: (variant, reference, minimum ratio reference ÷ variant).
RATIO_TARGETS = [
    ("epload-ep", "importlib", 40.0),
    ("epload-ep", "stevedore", 10.0),
    ("epload-ep-paths", "importlib", 300.0),
    ("epload-ep-paths", "stevedore", 80.0),
    ("epload-lazy", "pytorch-eager", 20.0),
]
IMPORT_TARGET_MS = 2.0
# Variants whose index check stats every watched file (`full` validation):
# their floor includes the bare cost of those stats.
FULL_CHECK = ("epload-ep", "epload-lazy")
LABELS = {v: x[0] for v, x in VARIANTS.items()}

# The fixture host: stock PyTorch's autoload at the end of its __init__, or
# the one line a framework that adopted epload would have instead.
HOST_INIT = '''\
"""A PyTorch-like host package: its import autoloads torch.backends."""
import os


{functions}


if os.environ.get("{switch}", "pytorch") == "epload":
    import epload
    epload.autoload(group="torch.backends", host=__name__)
elif _autoload_enabled():
    _autoload_backends()
'''


def write_host(hostdir):
    os.makedirs(os.path.join(hostdir, HOST))
    with open(os.path.join(hostdir, HOST, "__init__.py"), "w") as f:
        f.write(HOST_INIT.format(switch=HOST_SWITCH,
                                 functions=stock_autoload.FUNCTIONS.strip("\n")))


# Test-only sabotage (--break-variant) per kind, which the verification must
# catch; lookups ask for a group nobody provides.
BREAK = {"eager": {"EPLOAD_GEN_HOST": "no_such_host_module"},
         "first": {"EPLOAD_GEN_HOST": "no_such_host_module"}, "lazy": {"EPLOAD_MODE": "eager"}}

PROBE = ("\nimport json as _j\n"
         f"_h = sys.modules.get({HOST!r})\n"
         "_e = globals().get('eps')\n"
         "_r = {'modules': sorted(k for k in sys.modules if k.startswith('gen_backend_')),\n"
         "      'devices': sorted(k for k in (vars(_h) if _h else {}) if k.startswith('dev')),\n"
         "      'found': None if _e is None else\n"
         "          [e[0] if isinstance(e, (list, tuple)) else e.name for e in _e],\n"
         "      'epload': 'epload' in sys.modules,\n"
         "      'floor': '_epload_floor' in sys.modules}\n"
         f"print({VERIFY_MARK!r} + _j.dumps(_r))\n")


class Size(Variants):
    """The variants' command lines for one generated environment."""

    mark, warm = VERIFY_MARK, ("epload-eager", "stevedore")  # eager learns the devices

    def __init__(self, args, manifest, hostdir, stevedore_dir, work):
        self.base, self.python = clean_env(work), args.python
        self.site = manifest["search_path"]
        self.backends = [b["entry_point"] for b in manifest["backends"]]
        self.devices = [b["device"] for b in manifest["backends"]]
        mid = len(self.devices) // 2
        self.first_device = self.devices[mid]
        self.first_package = manifest["backends"][mid]["package"]
        self.pkg, self.hostdir = args.package_dir, hostdir
        self.where = f"{len(self.backends):,} backends"
        self.order = None  # importlib's order of the backends, once verified
        absent = {"stevedore": not stevedore_dir, "floor-native": not args.floor_dir}
        self.variants = [v for v in VARIANTS if not absent.get(v)]
        self.labels = {v: VARIANTS[v][0] for v in self.variants}
        self.retried = [v for v in self.variants if v.startswith("epload-")]
        self.vars, self.code = {}, {}
        for v in self.variants:
            _, kind, env, body = VARIANTS[v]
            env, g = dict(env), GROUP
            if v == args.break_variant:
                env.update(BREAK.get(kind, {}))
                g = g + ".broken" if kind not in BREAK else g
            self.vars[v] = env
            self.code[v] = body.format(g=g, floor=args.floor_dir, first=self.first_device,
                                       stevedore=stevedore_lookup(stevedore_dir, g)
                                       if stevedore_dir else "")
        self.commands = {v: self.argv(v) for v in self.variants}

    def argv(self, v, extra_env=None, suffix=""):
        env = dict(self.vars[v], **(extra_env or {}))
        prelude = (f"import os, sys; os.environ.update({env!r}); sys.path[0:0] = [{self.pkg!r}]; "
                   f"sys.path += [{self.hostdir!r}, {self.site!r}]")
        body = self.code[v]
        return [self.python, "-I", "-S", "-c", prelude + (f"; {body}" if body else "") + suffix]

    def probe_run(self, v):
        return self.argv(v, {"EPLOAD_DEBUG": "1"} if v in self.retried else None, PROBE), self.base

    def problems(self, v, r, stderr):
        """What is wrong with variant v's run (empty: it did its job)."""
        kind, n, out = VARIANTS[v][1], len(self.backends), []
        if kind == "lookup":
            found = r["found"] or []
            if sorted(found) != sorted(self.backends):
                out.append(f"found {len(found)} entry points of {GROUP!r}, expected the "
                           f"{n} generated backends")
            elif self.order is not None and found != self.order:
                out.append("found the backends in another order than importlib.metadata")
            elif v == "importlib":
                self.order = found  # discovery order: raw directory-listing order
        if kind == "eager":
            if len(r["modules"]) != n:
                out.append(f"imported {len(r['modules'])} of the {n} backend modules")
            if r["devices"] != sorted(self.devices):
                out.append(f"the host has {len(r['devices'])} of the {n} device attributes "
                           f"after `import {HOST}` (the backends did not register their devices)")
        if kind == "lazy":
            if r["modules"]:
                out.append(f"imported {len(r['modules'])} backend module(s) at start "
                           f"(e.g. {r['modules'][0]}); lazy must import none when devices "
                           "are known")
            if r["devices"]:
                out.append(f"the host has {len(r['devices'])} device attribute(s) at start")
        if kind == "first" and (r["modules"] != [self.first_package]
                                or r["devices"] != [self.first_device]):
            out.append(f"after using {HOST}.{self.first_device}: modules {r['modules'][:5]}, "
                       f"devices {r['devices'][:5]} (expected exactly {self.first_package} "
                       f"and {self.first_device})")
        if kind == "floor" and not r.get("floor"):
            out.append("did not import _epload_floor")
        if (kind in ("bare", "import", "floor") or v in ("importlib", "stevedore")) \
                and (r["modules"] or r["devices"]):
            out.append("imported backends although it should not")
        if v.startswith("epload-") and v != "epload-import":
            out += index_hit(stderr)
        return out

    def summary(self, verified):
        return {v: {"modules_imported": len(r["modules"]), "devices_set": len(r["devices"]),
                    "found": None if r["found"] is None else len(r["found"]), "attempts": tries}
                for v, (r, tries) in verified.items()}


def analyse(raw):
    stats = summarize_rounds(raw, reference="bare")
    ratios = {v: {ref: {"wall": ratio(stats[ref]["marginal_ms"], s["marginal_ms"]),
                        "cpu": ratio(stats[ref]["marginal_cpu_ms"], s["marginal_cpu_ms"])}
                  for ref in REFERENCES if ref in stats and ref != v}
              for v, s in stats.items()}
    return stats, ratios


def judge(sizes, stat_base=None):
    """The start-up targets at the largest size, each budget beside its floor."""
    row = max(sizes, key=lambda r: (r["distributions"], r["backends"]))
    st, ra = row["stats"], row["ratios"]
    where = {"backends": row["backends"], "distributions": row["distributions"]}
    m = st["epload-import"]["marginal_ms"] if "epload-import" in st else None
    out = [dict(where, target=f"`import epload` ≤ {IMPORT_TARGET_MS:g} ms (marginal)",
                variant="epload-import", reference=None, needed=IMPORT_TARGET_MS, measured=m,
                measured_cpu=st.get("epload-import", {}).get("marginal_cpu_ms"),
                met=None if m is None else m <= IMPORT_TARGET_MS)]
    for v, ref, need in RATIO_TARGETS:
        t = dict(where, target=f"{VARIANTS[v][0]}: ≤ 1/{need:g} of {ref}'s marginal cost",
                 variant=v, reference=ref, needed=need)
        out.append(t)
        if ref not in st:
            t.update(measured=None, measured_cpu=None, met=None,
                     note=f"{ref} not installed" if ref == "stevedore" else f"{ref} not measured")
            continue
        r = ra[v][ref]
        t.update(measured=r["wall"], measured_cpu=r["cpu"],
                 met=None if r["wall"] is None else r["wall"] >= need)
        if r["wall"] is None:
            t["note"] = "marginal cost within noise of zero"
        if "floor-native" in st:
            t["floor_libraries_ms"] = st["floor-native"]["marginal_ms"]
            full = v in FULL_CHECK
            if full and stat_base:
                t["floor_stats_ms"] = stat_base["floor_ms"]
            budget_floor(t, st[ref]["marginal_ms"] / need, None if full and not stat_base else
                         t["floor_libraries_ms"] + t.get("floor_stats_ms", 0.0))
    return out


def markdown(result):
    """The whole report: each size's tables, the marginals side by side, the targets."""
    cfg = result["config"]
    L = [f"### Python-backend start-up: {', '.join(f'{n:,}' for n in cfg['sizes'])} backends "
         f"among {cfg['noise']:,} ordinary distributions\n",
         f"{cfg['rounds']} interleaved rounds per size after {cfg['warmup']} warm-up; "
         f"whole-process medians; {cfg['machine']['cpus']} CPUs, {load_average(cfg)}"
         f"; backends' import cost {cfg['import_cost_ms']:g} ms.\n"]
    for row in result["sizes"]:
        L += size_table(row)
        if row.get("strace") or row.get("hyperfine"):
            L += syscall_table(row)
        L.append("")
    L.append("Ratios are the reference's marginal cost ÷ the variant's (marginal = median − "
             "bare median), wall time, same run; n/a when the variant's marginal is within "
             "noise of zero.\n")
    if len(result["sizes"]) > 1:
        L += marginal_table(result["sizes"])
    return "\n".join(L + targets_table(result)) + "\n"


def size_table(row):
    """One size's table: every variant's times, marginals and ratios."""
    st, ra, rows = row["stats"], row["ratios"], []
    for v, (label, *_) in VARIANTS.items():
        if v not in st:
            rows.append([label, "not built" if v == "floor-native" else "not installed"]
                        + [""] * 7)
            continue
        s = st[v]
        cells = ["1" if v == ref else "not installed" if ref not in st and ref == "stevedore"
                 else "" if ref not in st or v == "bare" else fmt_ratio(ra[v][ref]["wall"])
                 for ref in REFERENCES]
        rows.append([label] + times(s)
                    + (["", ""] if v == "bare" else [fmt_ms(s["marginal_ms"]),
                                                     fmt_ms(s["marginal_cpu_ms"])]) + cells)
    return [f"#### {row['backends']:,} backends ({row['distributions']:,} distributions)\n"] + \
        table(["variant", *TIMES, "marginal ms", "marginal CPU ms"]
              + [f"{r} ÷" for r in REFERENCES.values()], "l" + "r" * 8, rows)


def syscall_table(row):
    """The system-call counts and hyperfine medians taken at one size."""
    sc, hf = row.get("strace") or {}, row.get("hyperfine")
    rows = [[VARIANTS[v][0]] + syscall_cells(sc.get(v), None if hf is None else hf.get(v, {}))
            for v in VARIANTS if v in row["stats"]]
    return ["", f"System calls at {row['backends']:,} backends (one run each under "
                "`strace -f -c`)" + (" and `hyperfine -N` medians (not interleaved)"
                                     if hf else "") + ":\n"] + table(
        ["variant", *SYSCALL_COLUMNS] + (["hyperfine ms"] if hf else []),
        "lrrrr" + ("r" if hf else ""), rows)


def marginal_table(sizes):
    """Every variant's marginal cost at every size, side by side."""
    rows = [[label] + ["not installed" if v not in r["stats"] else
                       f"{fmt_ms(r['stats'][v]['marginal_ms'])} "
                       f"({fmt_ms(r['stats'][v]['marginal_cpu_ms'])})" for r in sizes]
            for v, (label, *_) in VARIANTS.items() if v != "bare"]
    return ["#### Marginal cost over the bare interpreter (ms, wall; CPU in parentheses)\n"] + \
        table(["variant"] + [f"{r['backends']:,} backends" for r in sizes],
              "l" + "r" * len(sizes), rows) + [""]


def targets_table(result):
    """The start-up targets: measured, met, and each budget beside its floor."""
    t0, sb = result["targets"][0], result.get("stat_baseline")
    L = [f"#### Start-up targets, at {t0['backends']:,} backends "
         f"({t0['distributions']:,} distributions)\n"]
    L += table(["target", "measured (wall)", "CPU time", "met", "budget ms", "floor ms",
                "reachable here"], "lrrlrrl", [target_cells(t) for t in result["targets"]])
    L.append("")
    if any("floor_libraries_ms" in t for t in result["targets"]):
        L.append("Budget: the reference's marginal cost ÷ the target ratio, the most epload's "
                 "marginal may cost. Floor: loading the shared libraries epload's module needs "
                 "(floor-native: an empty module linked like it)"
                 + (f", plus for `full` validation its {sb['stats']:,} stat calls alone "
                    f"(epload_bench BM_CacheStatBaseline, {fmt_ms(sb['cpu_ms'])} ms of CPU in "
                    f"process) shared by {sb['cpus']} CPUs" if sb else "")
                 + ": a lower bound no implementation can beat on this machine.\n")
    return L


def target_cells(t):
    """One target's row: target, measured, CPU, met, budget, floor, reachable."""
    if t["reference"] is None:  # a time in ms
        meas, cpu = (("n/a" if x is None else f"{fmt_ms(x)} ms")
                     for x in (t["measured"], t["measured_cpu"]))
        short = meas
    else:
        meas = fmt_ratio(t["measured"]) if t["measured"] is not None else t.get("note", "n/a")
        cpu, short = fmt_ratio(t["measured_cpu"]), f"{meas} of {t['needed']:g}×"
    met = t.get("note", "n/a") if t["met"] is None else "yes" if t["met"] else f"**no** ({short})"
    return [t["target"], meas, cpu, met] + budget_cells(t)


def plot(result, path):
    plot_marginals(path, result["sizes"], LABELS, "bare",
                   f"Python backends (among {result['config']['noise']:,} other distributions)",
                   "marginal start-up cost over a bare interpreter (ms, median)",
                   "Whole-process start-up cost of plugin backends")


def parse_args(argv):
    p = options.parser(PROG, __doc__, LABELS)
    options.add_common(p, rounds=(15, 5), warmup=(2, 1),
                       tools={"strace": False, "hyperfine": False}, env_dir=options.KEPT)
    options.add_sizes(p, "10,100,1000", "numbers of Python backends", 1, 0.0, VARIANTS)
    args = options.finish(p, p.parse_args(argv))
    args.package_dir = os.path.join(args.build, "python")
    fdir, pkg = os.path.join(args.build, "bench"), os.path.join(args.package_dir, "epload")
    args.floor_dir = fdir if glob.glob(os.path.join(fdir, "_epload_floor.*")) else None
    if not os.path.isfile(os.path.join(pkg, "__init__.py")) or \
            not glob.glob(os.path.join(pkg, "_native*")):
        p.error(f"no built epload package in {args.package_dir}: build first "
                f"(cmake --build {args.build}) or pass --build DIR")
    return args


def run(args, tmp):
    """Every size, then the stat floor and the targets; writes the report."""
    stevedore_dir = stevedore_location(args.python, clean_env(tmp))
    hostdir = os.path.join(tmp, "host")
    write_host(hostdir)
    result = {"config": config(args, sizes=args.sizes, noise=args.noise, group=GROUP,
                               import_cost_ms=args.import_cost_ms, package_dir=args.package_dir,
                               stevedore=stevedore_dir, broken_variant=args.break_variant),
              "sizes": [measure_size(args, n, tmp, hostdir, stevedore_dir) for n in args.sizes]}
    sb = stat_floor("bench_startup", args.build, args.sizes[-1] + args.noise, clean_env(tmp),
                    tmp, args.quick) if "floor-native" in result["sizes"][-1]["stats"] else None
    if sb:
        result["stat_baseline"] = sb
    result["targets"] = judge(result["sizes"], sb)
    write_report(result, markdown, args.md_out, args.json_out, args.plot, plot)
    return 0


def measure_size(args, n, tmp, hostdir, stevedore_dir):
    """One size generated, verified, timed (and the extra passes at the largest)."""
    work = os.path.join(tmp, f"size-{n}")
    os.makedirs(work)
    where = os.path.join(args.env_dir or os.path.join(tmp, "envs"), f"python-{n}-{args.noise}"
                         + (f"-cost{args.import_cost_ms:g}" if args.import_cost_ms else ""))
    manifest = kept_env("bench_startup", args.python, where, n, args.noise, GROUP,
                        extra=("--import-cost-ms", args.import_cost_ms))
    size = Size(args, manifest, hostdir, stevedore_dir, work)
    verified, raw = size.rounds("bench_startup", args, work, progress_line)
    stats, ratios = analyse(raw)
    row = {"backends": n, "distributions": n + args.noise, "stats": stats, "ratios": ratios,
           "verified": size.summary(verified), "commands": size.commands,
           "first_device": size.first_device}
    if n == args.sizes[-1]:
        row.update(extra_passes("bench_startup", args, size.commands, size.base, work))
    return row

"""Metadata operations one Python process start makes to look up one
entry-point group, counted with `strace -f -c`, less a process that looks
nothing up; every variant must answer as importlib does.

Variants: importlib, epload full, epload paths, shipped index.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from . import options
from .envs import clean_env, config, kept_env
from .proc import BenchError, capture, strace_counts
from .report import table, write_report

PROG = "metadata_ops.py"
GROUP = "torch.backends"
FAMILIES = ("stat", "openat", "getdents64", "read")
IMPORTS = "import sys, importlib.metadata, epload\n"
LOOKUPS = {
    "baseline": "",
    "importlib": f"importlib.metadata.entry_points(group={GROUP!r})",
    "epload full": f"epload.entry_points(group={GROUP!r})",
    "epload paths": f"epload.entry_points(group={GROUP!r})",
    "shipped index": f"epload.entry_points(group={GROUP!r})",
}


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    # One strace'd run per variant: no rounds to choose.
    options.add_common(p, rounds=None, quick=False, plot=False,
                       env_dir="where the generated environment is kept (default: under the build)")
    p.add_argument("--dists", type=int, default=6000, help="distributions (6000)")
    args = options.finish(p, p.parse_args(argv), built=True)
    if args.dists < 11:
        p.error("--dists must be at least 11 (10 of them are backends)")
    return args


def write_scripts(work):
    """One script a variant (its directory, not '', is sys.path[0]).  The
    names hold a dash: no script can shadow a module (importlib.py would be
    imported as `importlib` by Python 3.12 and later)."""
    scripts = {}
    for name, lookup in LOOKUPS.items():
        scripts[name] = os.path.join(work, "variant-" + name.replace(" ", "-") + ".py")
        with open(scripts[name], "w") as f:
            f.write(IMPORTS + ("import json; print(json.dumps(sorted([e.name, e.value] "
                               f"for e in {lookup})))" if lookup else ""))
    return scripts


def ship_index(args, base, work, env_dir, tmp):
    """`epload index build` for the processes' own sys.path: the index file."""
    path_script = os.path.join(work, "sys-path.py")
    with open(path_script, "w") as f:
        f.write("import json, sys; print(json.dumps(sys.path))\n")
    paths = json.loads(capture([args.python, path_script], base).stdout)
    index = os.path.join(env_dir, "env.index")
    capture([args.epload, "index", "build", "--output", index,
             *[a for p in paths for a in ("--path", p)]],
            dict(base, EPLOAD_CACHE_DIR=os.path.join(tmp, "cache-build")))
    return index


def cache_files(d):
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def run(args, tmp):
    if shutil.which("strace") is None:
        raise BenchError("strace is not installed (apt-get install strace)")
    package = os.path.join(args.build, "python")
    env_dir = args.env_dir or os.path.join(args.build, "bench-metadata-ops", f"env-{args.dists}")
    manifest = kept_env("metadata_ops", sys.executable, env_dir, 10, args.dists - 10, GROUP)
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    base = dict(clean_env(tmp), PYTHONPATH=os.pathsep.join([package, manifest["search_path"]]))
    caches = {name: os.path.join(tmp, "cache-" + name.replace(" ", "-")) for name in LOOKUPS}
    envs = {name: dict(base, EPLOAD_CACHE_DIR=caches[name]) for name in LOOKUPS}
    envs["epload paths"]["EPLOAD_VALIDATE"] = "paths"
    # Every script is written before the index is built: a change to a
    # directory on the path (sys.path[0] is theirs) makes the index stale.
    scripts = write_scripts(work)
    envs["shipped index"]["EPLOAD_INDEX"] = ship_index(args, base, work, env_dir, tmp)
    check = capture([args.python, scripts["shipped index"]],
                    dict(envs["shipped index"], EPLOAD_DEBUG="1")).stderr
    if "index shipped" not in check:
        raise BenchError(f"the shipped index was not used:\n{check[-2000:]}")
    result = {"config": config(args, dists=args.dists), "variants": {}}
    answers = {}
    for name in LOOKUPS:
        argv = [args.python, scripts[name]]
        # Warm: the cache written (full, paths), the page cache filled.
        answers[name] = capture(argv, envs[name]).stdout
        before = cache_files(caches[name])
        counts = strace_counts(argv, envs[name], tmp)
        result["variants"][name] = {k: counts[k] for k in FAMILIES} | {
            "total": counts["total"], "wrote_cache_files": sorted(cache_files(caches[name]) - before)}
    for name in LOOKUPS:
        if name != "baseline" and answers[name] != answers["importlib"]:
            raise BenchError(f"variant {name} answered differently from importlib:\n"
                             f"{answers[name][:500]}\n!=\n{answers['importlib'][:500]}")
    if result["variants"]["shipped index"]["wrote_cache_files"]:
        raise BenchError("the shipped index's process wrote cache files: "
                         f"{result['variants']['shipped index']['wrote_cache_files']}")
    floor = result["variants"]["baseline"]
    for v in result["variants"].values():
        v["metadata_ops"] = sum(v[k] - floor[k] for k in FAMILIES)
    write_report(result, markdown, md_out=args.md_out, json_out=args.json_out)
    return 0


def markdown(result):
    floor = result["variants"]["baseline"]
    rows = [[name, *(f"{v[k] - floor[k]:,}" for k in FAMILIES), f"{v['metadata_ops']:,}",
             ", ".join(v["wrote_cache_files"]) or "none"]
            for name, v in result["variants"].items() if name != "baseline"]
    lines = [f"Metadata operations of one process start's lookup of `{GROUP}`, "
             f"{result['config']['dists']:,} distributions (`strace -f -c`, less a process that "
             "looks nothing up):", ""]
    lines += table(["variant", "stat family", "openat", "getdents64", "read", "total",
                    "cache files written"], "lrrrrrl", rows)
    return "\n".join(lines) + "\n"

"""The one option vocabulary of the harnesses; each suite adds what only it has."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from .envs import SOURCE_DIR

DEFAULT_BUILD = os.environ.get("EPLOAD_BUILD_DIR",
                               os.path.join(SOURCE_DIR or os.getcwd(), "build"))


def parser(prog, doc, listing=None):
    """An ArgumentParser whose help is the docstring, {listing} filled in."""
    if listing:
        width = max(map(len, listing)) + 1
        doc = doc.format(listing="".join(f"  {n:<{width}} {w}\n" for n, w in listing.items()))
    return argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0],
                                   epilog=doc.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_common(p, rounds, warmup=(1, 1), python="/usr/bin/python3", outputs=True, tools=None,
               python_help=None, quick=True, plot=True, env_dir=None, least_rounds=1):
    """The options every suite shares.  ``rounds``/``warmup``: (default,
    --quick default); ``tools``: {tool: whether `auto` runs it with --quick}."""
    if rounds is not None:
        add_count(p, "--rounds", rounds, "timed rounds", least_rounds, quick)
        add_count(p, "--warmup", warmup, "untimed rounds first", 0, quick)
    if quick:
        p.add_argument("--quick", action="store_true", help="fewer rounds, fewer extra passes")
    p.add_argument("--python", default=python, help=python_help or f"interpreter ({python})")
    p.add_argument("--build", default=DEFAULT_BUILD,
                   help="epload build directory (default: $EPLOAD_BUILD_DIR, else <source>/build)")
    if env_dir:
        p.add_argument("--env-dir", metavar="DIR", help=env_dir)
    p.set_defaults(_tools=tools or {}, quick=False)
    if rounds is None:
        p.set_defaults(rounds=1, warmup=1)
    for tool in tools or {}:
        p.add_argument(f"--{tool}", choices=("auto", "on", "off"), default="auto",
                       help=f"the {tool} pass (auto: if installed"
                            + ("" if tools[tool] else ", not --quick") + ")")
    if outputs:
        p.add_argument("--json-out", metavar="FILE", help="write all results as JSON")
        p.add_argument("--md-out", metavar="FILE", help="also write the Markdown report to FILE")
        if plot:
            p.add_argument("--plot", metavar="PNG", help="plot marginal cost against backends")
        p.add_argument("--keep", action="store_true", help="keep the temporary directory")


def at_least(option, least, kind=int):
    """An argparse type: a ``kind`` number, "--OPTION must be >= LEAST" below."""
    def parse(text):
        n = kind(text)
        if n < least:
            raise argparse.ArgumentTypeError(f"{option} must be >= {least}")
        return n
    parse.__name__ = kind.__name__  # argparse's "invalid int value"
    return parse


def add_count(p, option, defaults, what, least=1, quick=True):
    """An integer option >= ``least``: ``defaults`` (default, --quick default)."""
    p.add_argument(option, type=at_least(option, least), metavar="N", help=f"{what} ({defaults[0]}"
                   + (f"; --quick: {defaults[1]})" if quick else ")"))
    counts = dict(p.get_default("_counts") or {})
    counts[option[2:].replace("-", "_")] = defaults
    p.set_defaults(_counts=counts)


KEPT = ("generate the environments into DIR and keep them there; a later run with the same "
        "sizes reuses them (default: a temporary directory, removed at the end)")


def add_sizes(p, default, what, least, cost, breakable):
    """--sizes, --noise, --import-cost-ms and the test-only --break-variant."""
    p.add_argument("--sizes", default=default, help=f"{what}, comma-separated ({default})")
    p.add_argument("--noise", type=at_least("--noise", 0), default=5000,
                   help="ordinary distributions beside the backends (5000)")
    p.add_argument("--import-cost-ms", type=at_least("--import-cost-ms", 0, float), default=cost,
                   help=f"CPU time each generated backend's import burns (gen_env.py; {cost:g})")
    p.add_argument("--break-variant", metavar="NAME", choices=list(breakable),
                   help="TEST ONLY: sabotage one variant to show the verification stops the run")
    p.set_defaults(_least=least)


def add_lookup(p, backends=1000):
    """--backends, --noise and --group: one lookup's environment."""
    p.add_argument("--backends", type=at_least("--backends", 1), default=backends,
                   help=f"backend distributions ({backends})")
    p.add_argument("--noise", type=at_least("--noise", 0), default=5000,
                   help="ordinary distributions (5000)")
    p.add_argument("--group", default="torch.backends", help="the group looked up (torch.backends)")


def finish(p, args, built=False):
    """Quick defaults filled in, sizes, paths, tools (and ``built``: epload) checked."""
    for name, defaults in getattr(args, "_counts", {}).items():
        if getattr(args, name) is None:
            setattr(args, name, defaults[args.quick])
    if hasattr(args, "sizes"):
        args.sizes = parse_sizes(p, args.sizes, args._least)
    args.build = os.path.abspath(args.build)
    args.epload = os.path.join(args.build, "epload")
    if getattr(args, "env_dir", None):
        args.env_dir = os.path.abspath(args.env_dir)
    if args.python is not None and not os.access(args.python, os.X_OK):
        p.error(f"interpreter not found: {args.python}")
    for tool, in_quick in args._tools.items():
        mode = getattr(args, tool)
        if mode == "on" and not shutil.which(tool):
            p.error(f"--{tool} on: {tool} is not installed (apt-get install {tool})")
        setattr(args, tool, mode == "on" or (mode == "auto" and (in_quick or not args.quick)
                                             and shutil.which(tool) is not None))
    if getattr(args, "plot", None):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error(f"--plot needs matplotlib in {sys.executable} "
                    "(apt-get install python3-matplotlib; run with /usr/bin/python3)")
    if built:
        need_built(p, args.epload)
    return args


def need_built(p, *paths):
    """p.error saying how to build unless each of ``paths`` is executable."""
    for path in paths:
        if not os.access(path, os.X_OK):
            p.error(f"no executable {path}: build first (scripts/setup.sh; scripts/demo.sh "
                    "builds too) or pass --build DIR")


def parse_sizes(p, text, least, option="--sizes"):
    """--sizes TEXT as a sorted list of distinct integers, each >= least."""
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        p.error(f"{option} must be comma-separated integers, got {text!r}")
    if not sizes or any(n < least for n in sizes):
        p.error(f"{option}: each size must be {'at least 1' if least else '0 or more'}")
    return sizes


def executable(p, path, option, default):
    """--OPTION's path (must be executable), else ``default`` if executable."""
    if path is None:
        return default if os.access(default, os.X_OK) else None
    if not os.access(path, os.X_OK):
        p.error(f"{option} {path}: not an executable")
    return path

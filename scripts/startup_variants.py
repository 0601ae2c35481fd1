"""The variants scripts/bench_startup.py times: their command lines (one
prelude, one measured statement each), the PyTorch-like host package they
import, and the check that each variant did its job before it is timed.
What each variant measures, and why they all run the same way, is told in
bench_startup.py's docstring.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stock_autoload  # noqa: E402
from harness_common import capture, checked_run, clean_env, retry_check  # noqa: E402

GROUP = "torch.backends"
HOST = "torch"
HOST_SWITCH = "EPLOAD_BENCH_HOST_AUTOLOAD"  # the fixture host: "pytorch" (default) or "epload"
VERIFY_MARK = "EPLOAD-BENCH-VERIFY "

# Variant name -> (label, kind).  Order = report order.
VARIANTS = {
    "bare": ("bare interpreter (`python3 -I -S`)", "bare"),
    "importlib": ("importlib.metadata `entry_points(group=)`", "lookup"),
    "stevedore": ("stevedore cached `get_group_all`", "lookup"),
    "pytorch-eager": ("PyTorch-style eager autoload (`import torch`)", "eager"),
    "floor-native": ("floor: empty module linked like `epload._native`", "floor"),
    "epload-import": ("`import epload`", "import"),
    "epload-ep": ("epload `entry_points(group=)`, `full`", "lookup"),
    "epload-ep-paths": ("epload `entry_points(group=)`, `paths`", "lookup"),
    "epload-eager": ("epload eager autoload", "eager"),
    "epload-lazy": ("epload lazy autoload, nothing used", "lazy"),
    "epload-lazy-paths": ("epload lazy autoload, `paths`", "lazy"),
    "epload-lazy-first": ("epload lazy + first device", "first"),
}

# The fixture host: stock PyTorch's autoload (stock_autoload.py) at the end of
# its __init__, or the one line a framework that adopted epload would have
# instead.
HOST_INIT = '''\
"""A PyTorch-like host package for scripts/bench_startup.py: its import ends
by autoloading the torch.backends entry points, with stock PyTorch's loop (the
default) or, when {switch}=epload, with epload.autoload (mode from
EPLOAD_MODE)."""
import os


{functions}


if os.environ.get("{switch}", "pytorch") == "epload":
    import epload
    epload.autoload(group="torch.backends", host=__name__)
elif _autoload_enabled():
    _autoload_backends()
'''


def write_host(hostdir):
    d = os.path.join(hostdir, HOST)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "__init__.py"), "w") as f:
        f.write(HOST_INIT.format(switch=HOST_SWITCH, functions=stock_autoload.FUNCTIONS.strip("\n")))


class Size:
    """The variants' command lines for one generated environment."""

    def __init__(self, args, manifest, hostdir, stevedore_dir, work):
        self.work = work
        self.env = clean_env(work)
        self.site = manifest["search_path"]
        self.manifest = manifest
        self.backends = [b["entry_point"] for b in manifest["backends"]]
        self.devices = [b["device"] for b in manifest["backends"]]
        self.packages = [b["package"] for b in manifest["backends"]]
        mid = len(self.devices) // 2
        self.first_device, self.first_package = self.devices[mid], self.packages[mid]
        self.python = args.python
        self.pkg = args.package_dir
        self.hostdir = hostdir
        self.broken = args.break_variant
        self.order = None  # importlib's order of the backends, once verified
        group = GROUP
        ep = "import epload; eps = epload.entry_points(group={g!r})"
        code = {
            "bare": ({}, ""),
            "importlib": ({}, "from importlib.metadata import entry_points; "
                              "eps = entry_points(group={g!r})"),
            "pytorch-eager": ({}, f"import {HOST}"),
            "epload-import": ({}, "import epload"),
            "floor-native": ({}, f"sys.path.insert(0, {args.floor_dir!r}); "
                                 "import _epload_floor") if args.floor_dir else None,
            "epload-ep": ({}, ep),
            "epload-ep-paths": ({"EPLOAD_VALIDATE": "paths"}, ep),
            "epload-eager": ({HOST_SWITCH: "epload", "EPLOAD_MODE": "eager"}, f"import {HOST}"),
            "epload-lazy": ({HOST_SWITCH: "epload", "EPLOAD_MODE": "lazy"}, f"import {HOST}"),
            "epload-lazy-paths": ({HOST_SWITCH: "epload", "EPLOAD_MODE": "lazy",
                                   "EPLOAD_VALIDATE": "paths"}, f"import {HOST}"),
            "epload-lazy-first": ({HOST_SWITCH: "epload", "EPLOAD_MODE": "lazy"},
                                  f"import {HOST}; dev = {HOST}.{self.first_device}"),
        }
        if stevedore_dir:
            code["stevedore"] = ({}, f"sys.path.append({stevedore_dir!r}); "
                                     "import stevedore.extension; sys.path.pop(); "
                                     "from stevedore import _cache; "
                                     "eps = _cache.get_group_all({g!r})")
        self.variants = [v for v in VARIANTS if code.get(v) is not None]
        self.vars, self.code = {}, {}
        for v in self.variants:
            env, body = code[v]
            env = dict(env)
            g = group
            if v == self.broken:
                # Test-only sabotage (--break-variant): the verification must
                # catch it.  Eager variants and the first use: the backends
                # look for a host that does not exist, so they register no
                # device; lazy: it runs eagerly; lookups: ask for a group
                # nobody provides.
                kind = VARIANTS[v][1]
                if kind in ("eager", "first"):
                    env["EPLOAD_GEN_HOST"] = "no_such_host_module"
                elif kind == "lazy":
                    env["EPLOAD_MODE"] = "eager"
                else:
                    g = group + ".broken"
            self.vars[v] = env
            self.code[v] = body.format(g=g)
        self.commands = {v: self.argv(v) for v in self.variants}

    def prelude(self, env):
        return (f"import os, sys; os.environ.update({env!r}); "
                f"sys.path[0:0] = [{self.pkg!r}]; sys.path += [{self.hostdir!r}, {self.site!r}]")

    def argv(self, v, extra_env=None, suffix=""):
        env = dict(self.vars[v], **(extra_env or {}))
        body = self.code[v]
        text = self.prelude(env) + (f"; {body}" if body else "") + suffix
        return [self.python, "-I", "-S", "-c", text]

    # -- warming and verification --

    def check(self, v):
        """Runs variant v once with a check appended; returns (report, stderr)."""
        probe = (
            "\nimport json as _j\n"
            f"_h = sys.modules.get({HOST!r})\n"
            "_e = globals().get('eps')\n"
            "_r = {'modules': sorted(k for k in sys.modules if k.startswith('gen_backend_')),\n"
            "      'devices': sorted(k for k in (vars(_h) if _h else {}) if k.startswith('dev')),\n"
            "      'found': None if _e is None else\n"
            "          [e[0] if isinstance(e, (list, tuple)) else e.name for e in _e],\n"
            "      'epload': 'epload' in sys.modules,\n"
            "      'floor': '_epload_floor' in sys.modules}\n"
            f"print({VERIFY_MARK!r} + _j.dumps(_r))\n")
        extra = {"EPLOAD_DEBUG": "1"} if v.startswith("epload-") else None
        return checked_run(self.argv(v, extra, probe), self.env, VERIFY_MARK, v,
                           f"variant {v} ({VARIANTS[v][0]}) failed at {len(self.backends)} "
                           f"backends; its code: {self.code[v]}")

    def problems(self, v, r, stderr):
        """What is wrong with variant v's run (empty: it did its job)."""
        kind = VARIANTS[v][1]
        n = len(self.backends)
        out = []
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
        if kind == "first":
            if r["modules"] != [self.first_package] or r["devices"] != [self.first_device]:
                out.append(f"after using {HOST}.{self.first_device}: modules {r['modules'][:5]}, "
                           f"devices {r['devices'][:5]} (expected exactly {self.first_package} "
                           f"and {self.first_device})")
        if kind == "floor" and not r.get("floor"):
            out.append("did not import _epload_floor")
        if kind in ("bare", "import", "floor") or v in ("importlib", "stevedore"):
            if r["modules"] or r["devices"]:
                out.append("imported backends although it should not")
        if v.startswith("epload-") and v != "epload-import" and "index hit" not in stderr:
            status = [ln for ln in stderr.splitlines() if "epload: index" in ln]
            out.append("no index cache hit (" + (status[-1] if status else "no index status") + ")")
        return out

    def warm_and_verify(self, attempts=40):
        """Warms every cache (epload's index and learned devices, stevedore's)
        and verifies every variant; retries while caches settle (a cache
        written in the clock tick of a change is not trusted at first)."""
        # PyTorch's loop and epload's eager autoload first: the latter learns
        # every backend's devices for the lazy variants.
        for v in ("epload-eager", "stevedore"):
            if v in self.commands:
                capture(self.commands[v], self.env)
        report = {}
        for v in self.variants:
            # Only caches can need another try: the index (epload variants)
            # and the learned devices (lazy).  Anything else fails at once.
            r, tries = retry_check(v, VARIANTS[v][0], f"{len(self.backends)} backends",
                                   self.code[v], self.check, self.problems,
                                   attempts if v.startswith("epload-") else 1)
            report[v] = {"modules_imported": len(r["modules"]), "devices_set": len(r["devices"]),
                         "found": None if r["found"] is None else len(r["found"]),
                         "attempts": tries}
        return report

#!/usr/bin/env python3
"""Generate a synthetic Python environment for epload's tests and benchmarks.

Writes, under OUT:

  OUT/site-packages/          a site-packages directory holding
      N backend distributions, each with a `[<group>]` entry point
          (default group: torch.backends), shuffled among
      M ordinary ("noise") distributions: console_scripts, gui_scripts,
          pytest11, flake8.extension and other groups, some with no
          entry_points.txt at all, a few as *.egg-info directories or files.
  OUT/manifest.json           what was generated:
      {"search_path": "<absolute OUT/site-packages>",
       "kind": "python", "group": "torch.backends",
       "backends": [{"dist", "version", "entry_point", "value", "device",
                     "package", "library"}, ...], ...}
      in the order the backends appear in the (creation-ordered) tree.

Output is deterministic: the same arguments give a byte-identical tree, and
files are created in the same order every time.  Only the standard library is
used, and 10,000 distributions take a second or two.

Backend kinds (--kind):
  python  Backend i is the package site-packages/gen_backend_<i>/ whose
          __init__.py busy-waits --import-cost-ms milliseconds when imported
          (CPU work, as a real import would do) and defines
              _autoload(host=None)
          The entry point is  gen_backend_<i> = gen_backend_<i>:_autoload
          and PyTorch calls it with no argument.  _autoload finds the host
          module as  sys.modules.get(os.environ.get("EPLOAD_GEN_HOST", "torch"))
          (a module object or a module name may also be passed as `host`)
          and, if that module is imported, registers its device by
              setattr(host, "dev<i>", <device object>)
          Device names are dev0000, dev0001, ... (wider past 10,000).  It
          returns the device name.  The module attribute AUTOLOAD_CALLS counts
          calls.  If env EPLOAD_GEN_LOG names a file, the import appends
          "import dev<i>" and each _autoload call "autoload dev<i>" to it, so
          a test can see which backends a fresh process loaded.
          The manifest's "library" is null for Python backends.
  native  (the default) Backend i is the package site-packages/gen_backend_<i>/
          holding an empty __init__.py and the shared library
              _backend<suffix>, the running interpreter's first extension
              suffix (importlib.machinery.EXTENSION_SUFFIXES[0], e.g.
              .cpython-311-x86_64-linux-gnu.so)
          The entry point is  gen_backend_<i> = gen_backend_<i>._backend:gen_backend_init
          (epload's backend ABI, include/epload/backend.h).  The libraries are
          copies (never hard links: dlopen de-duplicates by inode) of a few
          variants of native_backend.c (beside this file), compiled once per run with cc
          ($CC): --init-cost-us of CPU work in init, --relocs symbol
          relocations at dlopen, the device declared in the library's
          epload_devices section (every --undeclared-every'th one is not).
          Each copy gets its own device name patched into a placeholder.
          --broken makes the first backends broken, one of each kind
          (missing_library, missing_symbol, missing_dependency, init_fails,
          truncated, not_elf, abi_mismatch); the manifest's "broken" names it.
          The manifest's "library" is the library path.
Other kinds plug in through BACKEND_KINDS.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.machinery
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

# Distribution names, so that the environment is recognisable and does not
# collide with anything real.
BACKEND_PREFIX = "gen_backend_"
NOISE_PREFIX = "gen_noise_"
DEFAULT_GROUP = "torch.backends"
MAX_DISTRIBUTIONS = 1_000_000


# ---------------------------------------------------------------- writing ---

class Writer:
    """Creates files and directories in call order (the order is part of the
    determinism contract: directory-listing order follows creation order on
    many file systems, and the scanners under test must follow listing
    order)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files = 0

    def mkdir(self, rel: str) -> None:
        os.mkdir(os.path.join(self.root, rel))

    def write(self, rel: str, text: str) -> None:
        fd = os.open(os.path.join(self.root, rel),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        self.files += 1


def metadata_text(name: str, version: str, summary: str) -> str:
    return (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            f"Summary: {summary}\nLicense: MIT\n"
            f"Requires-Python: >=3.8\n\n{summary}\n")


def record_text(dist_info: str, files: list[str]) -> str:
    # Real RECORDs carry hashes; importlib never reads RECORD for entry
    # points, so a plausible shape is all that matters here.
    lines = [f"{f},sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,{100 + len(f)}" for f in files]
    lines.append(f"{dist_info}/RECORD,,")
    return "\n".join(lines) + "\n"


def version_of(rng: random.Random) -> str:
    return f"{rng.randrange(0, 10)}.{rng.randrange(0, 30)}.{rng.randrange(0, 12)}"


# ----------------------------------------------------------- noise dists ---

# (weight, shape) — what ordinary distributions look like.  The weights are
# only roughly those of a real environment; what matters is variety.
NOISE_SHAPES = [
    (34, "console"),
    (8, "console_gui"),
    (6, "pytest"),
    (6, "flake8"),
    (5, "multi"),
    (1, "near_miss"),
    (4, "comments"),
    (30, "no_entry_points"),
    (2, "egg_info_dir"),
    (1, "egg_info_no_eps"),
    (1, "egg_info_file"),
    (2, "empty_entry_points"),
]


def pick_shape(rng: random.Random) -> str:
    total = sum(w for w, _ in NOISE_SHAPES)
    r = rng.randrange(total)
    for w, shape in NOISE_SHAPES:
        if r < w:
            return shape
        r -= w
    raise AssertionError("unreachable")


# The entry_points.txt of each noise shape that has one ({p}: the package;
# {x}: a short flake8 code); the other shapes have none.
NOISE_ENTRY_POINTS = {
    "console": "[console_scripts]\n{p} = {p}.cli:main\n",
    "console_gui": ("[console_scripts]\n{p} = {p}.cli:main\n{p}-admin = {p}.admin:run\n\n"
                    "[gui_scripts]\n{p}-gui = {p}.gui:main\n"),
    "pytest": "[pytest11]\n{p} = {p}.plugin\n",
    "flake8": "[console_scripts]\n{p} = {p}.__main__:main\n\n[flake8.extension]\nX{x} = {p}.checker:Checker\n",
    "multi": ("[babel.extractors]\n{p} = {p}.babel:extract\n\n"
              "[console_scripts]\n{p} = {p}.cli:main [cli]\n\n"
              "[sphinx.builders]\n{p} = {p}.sphinx:Builder\n"),
    # Groups that look like the backend group but are not it.
    "near_miss": "[torch.backend]\n{p} = {p}:_autoload\n\n[torch.backends.extra]\n{p} = {p}:_autoload\n",
    "comments": ("# generated\n\n[console_scripts]\n# a comment\n"
                 "  {p}  =  {p}.cli:main  \n\n[{p}.plugins]\n"
                 "a = {p}.a\na = {p}.a_again\n"),
    "empty_entry_points": "",
}


def noise_entry_points(shape: str, pkg: str) -> str | None:
    text = NOISE_ENTRY_POINTS.get(shape)
    return None if text is None else text.format(p=pkg, x=pkg[-4:])


def write_noise(w: Writer, rng: random.Random, index: int, width: int) -> None:
    pkg = f"{NOISE_PREFIX}{index:0{width}d}"
    name = pkg.replace("_", "-")
    version = version_of(rng)
    shape = pick_shape(rng)
    summary = f"Synthetic ordinary distribution {index}"
    eps = noise_entry_points(shape, pkg)

    if shape == "egg_info_file":
        # A bare PKG-INFO file named *.egg-info (distutils-style install).
        w.write(f"{pkg}-{version}-py3.11.egg-info", metadata_text(name, version, summary))
        return
    if shape in ("egg_info_dir", "egg_info_no_eps"):
        d = f"{pkg}-{version}-py3.11.egg-info"
        w.mkdir(d)
        w.write(f"{d}/PKG-INFO", metadata_text(name, version, summary))
        w.write(f"{d}/top_level.txt", f"{pkg}\n")
        if shape == "egg_info_dir":
            w.write(f"{d}/entry_points.txt", f"[console_scripts]\n{pkg} = {pkg}:main\n")
        return

    d = f"{pkg}-{version}.dist-info"
    w.mkdir(d)
    w.write(f"{d}/METADATA", metadata_text(name, version, summary))
    files = [f"{pkg}/__init__.py", f"{d}/METADATA"]
    if eps is not None:
        w.write(f"{d}/entry_points.txt", eps)
        files.append(f"{d}/entry_points.txt")
    if index % 11 != 5:  # a few have no RECORD, as some installers leave
        w.write(f"{d}/RECORD", record_text(d, files))


# --------------------------------------------------------- backend kinds ---

PYTHON_BACKEND_TEMPLATE = '''\
"""Synthetic epload backend {index} (device {device}), from epload.bench.gen_env."""
import os
import sys
import time

DEVICE = "{device}"
AUTOLOAD_CALLS = 0

_log = os.environ.get("EPLOAD_GEN_LOG")
if _log:
    with open(_log, "a") as _f:
        _f.write("import " + DEVICE + "\\n")

_cost_ns = {cost_ns}
if _cost_ns:
    # Busy-wait: a real backend import burns CPU, it does not sleep.
    _end = time.perf_counter_ns() + _cost_ns
    while time.perf_counter_ns() < _end:
        pass


class Device:
    """The object registered on the host as host.{device}."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<synthetic device " + self.name + ">"


def _autoload(host=None):
    """Registers DEVICE on the host module; returns the device name."""
    global AUTOLOAD_CALLS
    AUTOLOAD_CALLS += 1
    if _log:
        with open(_log, "a") as f:
            f.write("autoload " + DEVICE + "\\n")
    if host is None:
        host = os.environ.get("EPLOAD_GEN_HOST", "torch")
    if isinstance(host, str):
        host = sys.modules.get(host)
    if host is not None:
        setattr(host, DEVICE, Device(DEVICE))
    return DEVICE
'''


def write_python_backend(w: Writer, args: argparse.Namespace, index: int,
                         width: int, device: str) -> dict:
    """Writes backend `index` as a pure-Python package; returns its manifest
    entry."""
    pkg = f"{BACKEND_PREFIX}{index:0{width}d}"
    name = pkg.replace("_", "-")
    version = "1.0.0"
    value = f"{pkg}:_autoload"
    d = f"{pkg}-{version}.dist-info"
    w.mkdir(d)
    w.write(f"{d}/METADATA", metadata_text(name, version, f"Synthetic backend for {device}"))
    eps = f"[{args.group}]\n{pkg} = {value}\n"
    if index % 5 == 0:  # some backends ship a command too
        eps += f"\n[console_scripts]\n{pkg}-info = {pkg}:_autoload\n"
    w.write(f"{d}/entry_points.txt", eps)
    w.write(f"{d}/RECORD", record_text(d, [f"{pkg}/__init__.py", f"{d}/METADATA",
                                           f"{d}/entry_points.txt"]))
    w.mkdir(pkg)
    w.write(f"{pkg}/__init__.py", PYTHON_BACKEND_TEMPLATE.format(
        index=index, device=device, cost_ns=int(round(args.import_cost_ms * 1e6))))
    return {"dist": name, "version": version, "entry_point": pkg, "value": value,
            "device": device, "package": pkg, "library": None}


# ----------------------------------------------------------- native kind ---

HERE = os.path.dirname(os.path.abspath(__file__))


def checkout_dir(here=HERE):
    """The epload checkout this file belongs to, or None (an installed copy).
    ``here`` is <checkout>/python/epload/bench, or <build>/python/epload/bench
    whose CMakeCache.txt names the checkout."""
    up = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    candidates = [up]
    try:
        with open(os.path.join(up, "CMakeCache.txt"), encoding="utf-8") as f:
            candidates += [ln.split("=", 1)[1].strip() for ln in f
                           if ln.startswith("CMAKE_HOME_DIRECTORY:")]
    except OSError:
        pass
    for c in candidates:
        if all(os.path.isfile(os.path.join(c, *n)) for n in (("scripts", "setup.sh"),
                                                              ("include", "epload", "backend.h"))):
            return os.path.abspath(c)
    return None


NATIVE_SOURCE = os.path.join(HERE, "native_backend.c")
NATIVE_PLACEHOLDER = b"EPLOAD_DEVICE_PLACEHOLDER______"  # 31 bytes + the NUL
NATIVE_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # this interpreter's
NATIVE_INIT = "gen_backend_init"
NATIVE_RELOCS = (0, 10, 100, 1000, 10000)
BROKEN_KINDS = ("missing_library", "missing_symbol", "missing_dependency", "init_fails",
                "truncated", "not_elf", "abi_mismatch")
NATIVE_DEP_SOURCE = "int nb_dep_value(void) { return 7; }\n"


class NativeBuilder:
    """Compiles each variant of native_backend.c once per run (into a
    temporary directory) and hands out per-device copies of it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cc = os.environ.get("CC", "cc")
        self.tmp = tempfile.mkdtemp(prefix="epload-gen-native-")
        atexit.register(shutil.rmtree, self.tmp, True)
        self.variants: dict[str, bytes] = {}

    def compile(self, out: str, defines: list[str], extra: list[str]) -> None:
        source = checkout_dir()
        if source is None:
            raise SystemExit("gen_env.py: --kind native needs epload's headers: run it from a "
                             "checkout of epload (its include/epload/backend.h)")
        cmd = [self.cc, "-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
               "-I", os.path.join(source, "include"), f"-DNB_INIT_COST_US={self.args.init_cost_us}",
               f"-DNB_RELOCS={self.args.relocs}", *defines, NATIVE_SOURCE, "-o", out, *extra]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise SystemExit(f"gen_env.py: cannot run the C compiler {self.cc!r}: {e.strerror} "
                             "(install gcc, or set CC)")
        if proc.returncode != 0:
            raise SystemExit(f"gen_env.py: compiling {NATIVE_SOURCE} failed:\n"
                             f"{' '.join(cmd)}\n{proc.stderr}")

    def variant(self, name: str) -> bytes:
        if name in self.variants:
            return self.variants[name]
        out = os.path.join(self.tmp, name + ".so")
        defines = {"declared": [], "undeclared": ["-DNB_UNDECLARED"], "init_fails": ["-DNB_FAIL"],
                   "abi_mismatch": ["-DNB_BAD_ABI"], "missing_dependency": ["-DNB_DEP"]}[name]
        extra = []
        if name == "missing_dependency":
            # Linked against a library that is then not installed anywhere.
            dep_c = os.path.join(self.tmp, "nb_dep.c")
            with open(dep_c, "w", encoding="utf-8") as f:
                f.write(NATIVE_DEP_SOURCE)
            dep = os.path.join(self.tmp, "libnb_dep.so")
            proc = subprocess.run([self.cc, "-shared", "-fPIC", dep_c, "-o", dep],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"gen_env.py: compiling {dep_c} failed:\n{proc.stderr}")
            extra = ["-L", self.tmp, "-lnb_dep"]
        self.compile(out, defines, extra)
        with open(out, "rb") as f:
            data = f.read()
        if data.count(NATIVE_PLACEHOLDER) != 1:
            raise SystemExit(f"gen_env.py: {name} variant of {NATIVE_SOURCE} must contain the "
                             "device placeholder exactly once")
        self.variants[name] = data
        return data

    def copy_for(self, name: str, device: str) -> bytes:
        data = self.variant(name)
        at = data.index(NATIVE_PLACEHOLDER)
        patch = device.encode("ascii").ljust(len(NATIVE_PLACEHOLDER), b"\0")
        return data[:at] + patch + data[at + len(NATIVE_PLACEHOLDER):]


def write_binary(w: Writer, rel: str, data: bytes) -> None:
    fd = os.open(os.path.join(w.root, rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    w.files += 1


def write_native_backend(w: Writer, args: argparse.Namespace, index: int,
                         width: int, device: str) -> dict:
    """Writes backend `index` as a package holding a native library; returns
    its manifest entry."""
    builder = getattr(args, "native_builder", None)
    if builder is None:
        builder = args.native_builder = NativeBuilder(args)
    broken = BROKEN_KINDS[index] if args.broken and index < len(BROKEN_KINDS) else None
    declared = not (args.undeclared_every and index % args.undeclared_every
                    == args.undeclared_every - 1)
    pkg = f"{BACKEND_PREFIX}{index:0{width}d}"
    name = pkg.replace("_", "-")
    version = "1.0.0"
    symbol = NATIVE_INIT + ("_missing" if broken == "missing_symbol" else "")
    value = f"{pkg}._backend:{symbol}"
    lib_rel = f"{pkg}/_backend{NATIVE_SUFFIX}"
    d = f"{pkg}-{version}.dist-info"
    w.mkdir(d)
    w.write(f"{d}/METADATA", metadata_text(name, version, f"Synthetic native backend for {device}"))
    w.write(f"{d}/entry_points.txt", f"[{args.group}]\n{pkg} = {value}\n")
    files = [f"{pkg}/__init__.py", f"{d}/METADATA", f"{d}/entry_points.txt"]
    if broken != "missing_library":
        files.append(lib_rel)
    w.write(f"{d}/RECORD", record_text(d, files))
    w.mkdir(pkg)
    w.write(f"{pkg}/__init__.py", "")
    if broken is None or broken == "missing_symbol":
        data = builder.copy_for("declared" if declared else "undeclared", device)
    elif broken in ("init_fails", "abi_mismatch", "missing_dependency"):
        data = builder.copy_for(broken, device)
    elif broken == "truncated":
        data = builder.copy_for("declared", device)
        data = data[:len(data) // 3]
    elif broken == "not_elf":
        data = b"this is not a shared library\n" * 8
    else:
        data = None
    if data is not None:
        write_binary(w, lib_rel, data)
    return {"dist": name, "version": version, "entry_point": pkg, "value": value,
            "device": device, "package": pkg, "library": os.path.join(w.root, lib_rel),
            "declared": declared and broken not in ("missing_library", "not_elf"),
            "broken": broken, "init_cost_us": args.init_cost_us, "relocs": args.relocs}


# kind -> function(writer, args, index, width, device) -> manifest entry.
# A new kind adds one function here (and whatever build step it needs).
BACKEND_KINDS = {
    "python": write_python_backend,
    "native": write_native_backend,
}


# ------------------------------------------------------------------ main ---

def valid_group(group: str) -> str | None:
    """Returns why `group` cannot be an entry_points.txt section, or None."""
    if not group:
        return "must not be empty"
    if group != group.strip():
        return "must not start or end with whitespace"
    if any(c in group for c in "[]") or group.startswith("#"):
        return "must not contain '[' or ']' or start with '#'"
    if len(group.splitlines()) != 1:
        return "must be a single line"
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gen_env.py",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="output directory (created; must be empty unless --force)")
    p.add_argument("--backends", "-n", type=int, required=True, metavar="N",
                   help="number of backend distributions (with a --group entry point)")
    p.add_argument("--noise", "-m", type=int, required=True, metavar="M",
                   help="number of ordinary distributions among them")
    p.add_argument("--kind", default="native", choices=sorted(BACKEND_KINDS),
                   help="backend kind (default: native)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed for the shuffle and the noise shapes (default: 0)")
    p.add_argument("--group", default=DEFAULT_GROUP,
                   help=f"entry-point group of the backends (default: {DEFAULT_GROUP})")
    p.add_argument("--import-cost-ms", type=float, default=0.0, metavar="MS",
                   help="CPU time each Python backend's import burns (default: 0)")
    p.add_argument("--init-cost-us", type=int, default=0, metavar="US",
                   help="CPU time each native backend's init burns (default: 0)")
    p.add_argument("--relocs", type=int, default=100, choices=NATIVE_RELOCS,
                   help="symbol relocations per native library (default: 100)")
    p.add_argument("--undeclared-every", type=int, default=0, metavar="K",
                   help="every K-th native backend does not declare its device (default: 0, none)")
    p.add_argument("--broken", action="store_true",
                   help="make the first native backends broken, one of each kind: "
                        + ", ".join(BROKEN_KINDS))
    p.add_argument("--force", action="store_true",
                   help="replace OUT/site-packages and OUT/manifest.json if OUT is not empty")
    args = p.parse_args(argv)

    for opt in ("backends", "noise"):
        v = getattr(args, opt)
        if v < 0 or v > MAX_DISTRIBUTIONS:
            p.error(f"--{opt} must be between 0 and {MAX_DISTRIBUTIONS}, got {v}")
    if args.import_cost_ms < 0 or args.import_cost_ms != args.import_cost_ms:
        p.error(f"--import-cost-ms must be a non-negative number, got {args.import_cost_ms}")
    if args.init_cost_us < 0:
        p.error(f"--init-cost-us must be non-negative, got {args.init_cost_us}")
    if args.undeclared_every < 0:
        p.error(f"--undeclared-every must be non-negative, got {args.undeclared_every}")
    if args.kind != "native" and (args.broken or args.undeclared_every or args.init_cost_us):
        p.error("--broken, --undeclared-every and --init-cost-us apply to --kind native only")
    why = valid_group(args.group)
    if why:
        p.error(f"--group {args.group!r} {why}")
    if os.path.lexists(args.out) and not os.path.isdir(args.out):
        p.error(f"OUT {args.out!r} exists and is not a directory")
    if os.path.isdir(args.out) and os.listdir(args.out) and not args.force:
        p.error(f"OUT {args.out!r} is not empty; choose another directory or pass --force "
                "(which replaces OUT/site-packages and OUT/manifest.json)")
    return args


def generate(args: argparse.Namespace) -> dict:
    out = os.path.abspath(args.out)
    site = os.path.join(out, "site-packages")
    os.makedirs(out, exist_ok=True)
    if args.force:
        if os.path.lexists(site):
            if os.path.isdir(site) and not os.path.islink(site):
                shutil.rmtree(site)
            else:
                os.unlink(site)
        manifest_path = os.path.join(out, "manifest.json")
        if os.path.lexists(manifest_path):
            os.unlink(manifest_path)
    os.mkdir(site)

    rng = random.Random(args.seed)
    order = [True] * args.backends + [False] * args.noise
    rng.shuffle(order)

    bwidth = max(4, len(str(max(args.backends - 1, 0))))
    nwidth = max(5, len(str(max(args.noise - 1, 0))))
    write_backend = BACKEND_KINDS[args.kind]
    w = Writer(site)
    backends = []
    nb = nn = 0
    for is_backend in order:
        if is_backend:
            device = f"dev{nb:0{bwidth}d}"
            backends.append(write_backend(w, args, nb, bwidth, device))
            nb += 1
        else:
            write_noise(w, rng, nn, nwidth)
            nn += 1

    manifest = {
        "search_path": site,
        "kind": args.kind,
        "group": args.group,
        "distributions": args.backends + args.noise,
        "noise": args.noise,
        "seed": args.seed,
        "import_cost_ms": args.import_cost_ms,
        "backends": backends,
    }
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        generate(args)
    except OSError as e:
        print(f"gen_env.py: cannot write {e.filename or args.out}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Randomized differential test of backend resolution: the file epload
resolves a backend's module to must be the file importlib would import.

Each seed builds one search path of backends whose modules (`modN` or
`pkgN.mod`) have a random set of candidate files: the module with each
extension suffix, `.py` and `.pyc`; a package directory with `__init__` in
each of those forms; some candidates are directories instead of files, and
some packages are namespace directories (no `__init__`).  The oracle is
`importlib.util.find_spec(module).origin` in a fresh `/usr/bin/python3`
(nothing is imported but the empty parent packages); epload's answer is
`library` in `epload devices --json`.  Where importlib finds no file (no
spec, or a namespace package), epload must report the backend unresolved.
Deterministic: fixed seeds; a failure names the seed and keeps the tree
under pytest's tmp_path.
"""

import json
import os
import random
import subprocess

import pytest

import difftrees
from conftest import PYTHON

# More trees: EPLOAD_RANDOM_TREES=400 (40 by default, ~2 s).
TREES = int(os.environ.get("EPLOAD_RANDOM_TREES", "40"))

# The extension suffixes of the interpreter under test (the oracle's).
EXT = json.loads(subprocess.run(
    [PYTHON, "-c", "import importlib.machinery as m, json; print(json.dumps(m.EXTENSION_SUFFIXES))"],
    capture_output=True, text=True, check=True).stdout)
SUFFIXES = EXT + [".py", ".pyc"]

ORACLE = r"""
import importlib.util, json, sys
site, modules = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, site)
out = {}
for m in modules:
    try:
        spec = importlib.util.find_spec(m)
    except Exception as e:  # a parent that is not a package
        spec = None
    out[m] = spec.origin if spec is not None and spec.origin not in (None, "namespace") else None
print(json.dumps(out))
"""


def candidate(rng, path, kind):
    """A file at `path`, or now and then a directory named like one (which
    neither importlib nor epload may take)."""
    if rng.random() < 0.1:
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "ext":
        difftrees.write(path, b"\x7fELF not really", mode="wb")
    else:
        difftrees.write(path, "def init(): pass\n")


def build(rng, site):
    """Writes the backends; returns {module: backend name}."""
    modules = {}
    for i in range(rng.randrange(4, 14)):
        module = f"mod{i}" if rng.random() < 0.5 else f"pkg{i}.mod"
        if "." in module:
            difftrees.write(site / f"pkg{i}" / "__init__.py", "")
        base = site.joinpath(*module.split("."))
        if rng.random() < 0.5:
            base.mkdir(parents=True, exist_ok=True)  # a package, or a namespace portion
            for s in SUFFIXES:
                if rng.random() < 0.3:
                    candidate(rng, base / f"__init__{s}", "ext" if s in EXT else "py")
        for s in SUFFIXES:
            if rng.random() < 0.35:
                candidate(rng, base.parent / f"{base.name}{s}", "ext" if s in EXT else "py")
        name = f"b{i}"
        difftrees.dist(site, f"rb{i}-1.0.dist-info",
                       metadata=f"Metadata-Version: 2.1\nName: rb{i}\nVersion: 1.0\n",
                       entry_points=f"[torch.backends]\n{name} = {module}:init\n")
        modules[module] = name
    return modules


@pytest.mark.parametrize("seed", range(TREES))
def test_resolution_matches_importlib(seed, tmp_path, epload_bin):
    rng = random.Random(seed)
    site = tmp_path / "site"
    site.mkdir()
    modules = build(rng, site)
    p = subprocess.run([PYTHON, "-I", "-S", "-c", ORACLE, str(site), json.dumps(list(modules))],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    want = json.loads(p.stdout)
    p = subprocess.run([epload_bin, "devices", "--no-cache", "--json", f"--path={site}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = {b["backend"]: b for b in json.loads(p.stdout)["backends"]}
    for module, name in modules.items():
        b = got[name]
        if want[module] is None:
            assert b["kind"] == "unresolved", f"seed {seed}: {module}: importlib finds no file, epload {b}"
        else:
            assert b["library"] == want[module], f"seed {seed}: {module}: importlib {want[module]}, epload {b}"

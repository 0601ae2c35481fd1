"""Randomized differential test: epload's entry points must equal
importlib.metadata's on generated trees that mix every rule at once.

Each seed builds one search path of a few dozen distributions whose
`entry_points.txt` files are assembled from the pieces the crafted cases
(difftrees.py) test one by one: every `str.splitlines` line boundary, Python's
whole whitespace set around sections, names and values, comments, blank
lines, text before the first section, `=` inside values, duplicate names,
extras, non-ASCII names; metadata directories with mixed-case suffixes,
egg-info directories and files, `.egg/EGG-INFO` directories, names that
normalize alike (first wins) within and across up to three search paths,
missing directories and plain files on the path.  About one tree in five also holds a file importlib raises on (a line
without `=`, invalid UTF-8): then both must fail.  Compared as in
test_differential.py: group, name, value, distribution name and version, in
order.  Deterministic: fixed seeds; a failure prints the seed and the tree
is kept under pytest's tmp_path.
"""

import os
import random

import pytest

import difftrees
from conftest import run_epload, run_importlib
from test_differential import _compare

# More trees: EPLOAD_RANDOM_TREES=400 (40 by default, ~3 s).
TREES = int(os.environ.get("EPLOAD_RANDOM_TREES", "40"))

LINE_ENDS = ["\n", "\n", "\n", "\r\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85",
             "\u2028", "\u2029"]
SPACE = [" ", "  ", "\t", "\x1f", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a", "\u202f",
         "\u205f", "\u3000", ""]
GROUPS = ["console_scripts", "torch.backends", "epload.test", "g", "Weird Group", "x.y-z",
          "torch.backend"]
NAMES = ["a", "main", "npu", "b-c", "d.e", "F_G", "dup", "ü", "名前", "x y"]
VALUES = ["mod:obj", "pkg.mod:Class.attr", "mod", "a.b:c [extra1, extra2]", "m:f [x]",
          "m = n", "m:f#notacomment", "  spaced.mod  :  obj  ", "mod:obj;x", "é.mod:f"]
SUFFIXES = [".dist-info", ".dist-info", ".DIST-INFO", ".Dist-Info", ".egg-info", ".EGG-INFO"]
DIST_NAMES = ["alpha", "Beta", "gamma_pkg", "delta.pkg", "Epsilon-Pkg", "zeta", "eta9", "theta"]


def ws(rng):
    return "".join(rng.choice(SPACE) for _ in range(rng.randrange(3)))


def entry_points_text(rng, broken):
    lines = []
    if rng.random() < 0.2:
        lines.append(rng.choice(["# leading comment", "; also a comment", ""]))
    for _ in range(rng.randrange(1, 4)):
        lines.append(f"{ws(rng)}[{rng.choice(GROUPS)}]{ws(rng)}")
        for _ in range(rng.randrange(0, 5)):
            roll = rng.random()
            if roll < 0.1:
                lines.append(rng.choice(["# comment", ";comment", f"{ws(rng)}#x = y", ""]))
            else:
                lines.append(f"{ws(rng)}{rng.choice(NAMES)}{ws(rng)}={ws(rng)}"
                             f"{rng.choice(VALUES)}{ws(rng)}")
    if broken == "no-equals":
        lines.insert(rng.randrange(1, len(lines) + 1), "this line has no equals sign")
    text = ""
    for line in lines:
        text += line + rng.choice(LINE_ENDS)
    data = text.encode("utf-8")
    if broken == "utf8":
        cut = rng.randrange(len(data) + 1)
        data = data[:cut] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + data[cut:]
    return data


def metadata_text(rng, name, version, complete):
    """METADATA for `name` `version`; unless `complete`, Name or Version may be
    missing or doubled.  A directory named as the wheel format writes it
    (see ARCHITECTURE.md, "Known approximations") gets complete METADATA,
    which that format requires."""
    key = rng.choice
    text = f"{key(['Metadata-Version', 'metadata-version'])}: 2.1\n"
    roll = rng.random() if not complete else 1.0
    if roll < 0.05:
        pass  # no Name: importlib's dist.name is None
    elif roll < 0.1:
        text += f"Name: {name}\nName: other-{name}\n"  # the first one counts
    else:
        text += f"{key(['Name', 'name', 'NAME'])}:{rng.choice([' ', '  ', chr(9)])}{name}\n"
    if complete or rng.random() < 0.95:
        text += f"{key(['Version', 'version'])}: {version}\n"
    return (text + f"Summary: {rng.choice(['x', 'folded', 'ü'])}\n"
            + rng.choice(["", " continued\n"]) + "\n")


def build_tree(rng, site):
    broken_at = rng.randrange(40) if rng.random() < 0.2 else None
    count = rng.randrange(8, 30)
    for i in range(count):
        base = rng.choice(DIST_NAMES)
        # Some names normalize alike (first on the listing wins); most differ.
        name = base if rng.random() < 0.25 else f"{base}{i}"
        version = rng.choice(["1.0", "2.0.post1", "0.1a1", "10", "1!2.0", "1.0+local.7",
                              "1.0_beta", "1.0-1"])
        suffix = rng.choice(SUFFIXES)
        broken = None
        if i == broken_at:
            broken = rng.choice(["no-equals", "utf8"])
        eps = entry_points_text(rng, broken) if rng.random() < 0.9 else None
        dirname = f"{name}-{version}{suffix}"
        if (site / dirname).exists():
            continue  # the same name drawn twice
        wheel_named = (suffix == ".dist-info" and "-" not in name
                       and all(c.isalnum() or c in ".!+" for c in version))
        if suffix.lower() == ".egg-info" and rng.random() < 0.3 and eps is None:
            # distutils style: the egg-info is a file holding PKG-INFO
            difftrees.write(site / dirname, metadata_text(rng, name, version, False))
            continue
        if suffix.lower() == ".egg-info" and rng.random() < 0.15:
            # an egg directory: X.egg/EGG-INFO holds the metadata
            d = site / f"{name}-{version}-py3.11.egg" / "EGG-INFO"
            difftrees.write(d / "PKG-INFO", metadata_text(rng, name, version, False))
        else:
            metadata_file = "PKG-INFO" if suffix.lower() == ".egg-info" else "METADATA"
            d = difftrees.dist(site, dirname, metadata=metadata_text(rng, name, version, wheel_named),
                               metadata_file=metadata_file)
        if eps is not None:
            difftrees.write(d / "entry_points.txt", eps)
        if not wheel_named and rng.random() < 0.05:
            # METADATA importlib cannot decode: ep.dist.name raises there
            for meta in ("METADATA", "PKG-INFO"):
                if (d / meta).exists():
                    difftrees.write(d / meta, b"Name: bad\xff\nVersion: 1\n")


def build_paths(rng, root):
    """One to three search paths (names repeat across them: the first copy
    on the path wins, a shadowed one is never read), sometimes with a
    missing directory or a plain file among them."""
    paths = []
    for k in range(rng.randrange(1, 4)):
        site = root / f"site{k}"
        site.mkdir()
        build_tree(rng, site)
        paths.append(str(site))
    if rng.random() < 0.2:
        paths.insert(rng.randrange(len(paths) + 1), str(root / "missing"))
    if rng.random() < 0.2:
        difftrees.write(root / "file.txt", "not a directory")
        paths.insert(rng.randrange(len(paths) + 1), str(root / "file.txt"))
    return paths


@pytest.mark.parametrize("seed", range(TREES))
def test_generated_tree_matches_importlib(seed, tmp_path, epload_bin):
    rng = random.Random(seed)
    paths = build_paths(rng, tmp_path)
    oracle = run_importlib(paths)
    if "ok" in oracle:
        _compare(epload_bin, paths)
    else:
        rc, rows, err = run_epload(epload_bin, paths)
        assert rc == 1, f"seed {seed}: importlib raised ({oracle['error']}) but epload gave {rows}"

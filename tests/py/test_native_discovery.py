"""The lazy autoload's native discovery against its Python loop.

A lazy `import host` with a usable learned-device store keeps the index's
rows native (_native.Discovery, python/src/discovery.cpp) and matches them
against the store in C++.  The Python loop in Session._discover, fed the same
rows as tuples, is the reference: for random distribution trees and random
store contents (devices learned for the right stamp, stale stamps, hooks,
duplicate and shared devices, entries that are not arrays of strings, empty
arrays, unrelated keys), both must give the same session: the same backends
in the same order with the same entry points, distributions, stamps, devices
and sources, the same unknown and at-start backends, and the same device
map.  Cases the native path must decline (declared devices, an unusable
store, EPLOAD_DISABLE) must fall back to the loop and still agree.  Fresh
interpreters; failures name the seed.
"""

import json
import os
import random

import pytest

from pyfixtures import make_dist, random_sites, run_json

SEEDS = int(os.environ.get("EPLOAD_RANDOM_TREES", "12"))

BODY = r'''
import json, os, random, sys, types
import epload._autoload as A

seed, store_kind = int(sys.argv[1]), sys.argv[2]
rng = random.Random(seed)
GROUP = "torch.backends"
host = types.ModuleType("hosty")
sys.modules["hosty"] = host


def session(native):
    s = A.Session(GROUP, host, "hosty", "lazy")
    if not native:
        s._discover_native = lambda found: False
    s._discover()
    return s


def dump(s):
    rows = []
    for i in range(s._n):
        b = s._make(i)
        ep = b.entry_point
        rows.append([ep.name, ep.value, ep.group, b.dist_path, b.stamp, ep.dist.name,
                     ep.dist.version, b.devices, b.source, b.state, b.disabled_by])
    names = list(s.devices)
    return {"n": s._n, "unknown": list(s.unknown), "at_start": list(s._at_start),
            "rows": rows, "names": names,
            "devices": {d: list(s.devices.get(d)) for d in names},
            "absent": s.devices.get("no-such-device", "absent"),
            "index_of": [s._index_of(r[0]) for r in rows] + [s._index_of("no-such-backend")]}


base = session(False)
store = A._Store(GROUP, "hosty")
pool = ["d%d" % k for k in range(5)]
entries = {}
for i in range(base._n):
    name, value, _, pos = base._rows[i]
    _, _, path, stamp = base._dists[pos]
    key = "%s\x1f%s\x1f%s" % (name, value, path)
    r = rng.random()
    if r < 0.55:
        devs = rng.sample(pool, rng.randrange(0, 3))
        if devs and rng.random() < 0.2:
            devs.append(devs[0])  # a device listed twice
        entries[key] = [stamp] + devs
    elif r < 0.65:
        entries[key] = ["1:2:3:4", "stale"]
    elif r < 0.72:
        entries[key] = [stamp, 7]
    elif r < 0.78:
        entries[key] = []
    elif r < 0.82:
        entries[key] = {"not": "an array"}
entries["nobody\x1fnothing:x\x1f/nowhere"] = ["1:1:1:1", "d0"]
doc = {"format": "epload-devices", "version": 1, "group": GROUP, "host": "hosty",
       "backends": entries}
if store_kind == "foreign":
    doc["host"] = "another"
elif store_kind == "backends-list":
    doc["backends"] = []
os.makedirs(os.path.dirname(store.path), exist_ok=True)
with open(store.path, "w") as f:
    json.dump(doc, f)

native, loop = session(True), session(False)
print(json.dumps({"native_used": native._native is not None, "loop_used": loop._native is not None,
                  "native": dump(native), "loop": dump(loop)}))
'''


def draw(rng, root, declare=False):
    """Random sites of distributions with torch.backends entry points (some
    distributions with several, some names repeated on later sites)."""
    def add(site, k, name):
        eps = [f"be{rng.randrange(30)} = mod{k}:init{j}" for j in range(rng.choice([1, 1, 2, 3]))]
        groups = {"torch.backends": eps}
        if declare and rng.random() < 0.5:
            groups["epload.devices"] = [f"decl{k} = {eps[0].split(' = ')[0]}"]
        kind = "egg-info" if rng.random() < 0.2 else "dist-info"
        make_dist(site, name, f"1.{k}", groups, kind=kind)
    return random_sites(rng, root, add)


def run(tmp_path, seed, store_kind="ours", declare=False, env=None, relative=False):
    rng = random.Random(seed)
    sites = draw(rng, tmp_path, declare)
    code = f"import sys; sys.argv[1:] = [{str(seed)!r}, {store_kind!r}]\n"
    if relative:  # named relative to the current directory (tmp_path); site.py
        # would make PYTHONPATH entries absolute
        code += f"sys.path[1:1] = {[s.name for s in sites]!r}\n"
        sites = []
    return run_json(tmp_path, code + BODY, pythonpath=[str(s) for s in sites], env=env)


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_native_discovery_equals_the_loop(seed, relative, tmp_path):
    got = run(tmp_path, seed, relative=relative)
    check(got, seed, relative, tmp_path)


@pytest.mark.parametrize("env", [{"EPLOAD_VALIDATE": "paths"}, {"EPLOAD_NO_CACHE": "1"}])
def test_native_discovery_equals_the_loop_whatever_the_index(env, tmp_path):
    for seed in range(3):
        root = tmp_path / f"s{seed}"
        root.mkdir()
        check(run(root, seed, env=env), seed, False, root)


def check(got, seed, relative, tmp_path):
    if relative:
        assert all(r[3].startswith("/") for r in got["native"]["rows"])
        assert any(r[3].startswith(str(tmp_path) + "/site") for r in got["loop"]["rows"]), got["loop"]["rows"][:2]
    assert got["native_used"], f"seed {seed}: the native path was not taken"
    assert not got["loop_used"]
    assert got["native"] == got["loop"], f"seed {seed}"


@pytest.mark.parametrize("store_kind,declare,env", [
    ("foreign", False, None),
    ("backends-list", False, None),
    ("ours", True, None),
    ("ours", False, {"EPLOAD_DISABLE": "be1,be2"}),
])
def test_native_discovery_declines_what_the_loop_decides(store_kind, declare, env, tmp_path):
    for seed in range(3):
        root = tmp_path / f"s{seed}"
        root.mkdir()
        got = run(root, seed, store_kind, declare, env)
        assert got["native"] == got["loop"], f"seed {seed}"
        if store_kind != "ours" or env:
            assert not got["native_used"], f"seed {seed}"

"""EntryPoint objects made natively (python/src/objects.cpp) against the
Python path that makes them from tuples (_entry_points._build).

entry_points() takes the native path once _native.bind_classes() accepted
the EntryPoint and _DistRef classes.  For random distribution trees (several
groups, dist-info and egg-info, names repeated on later sites, a directory
name that is not UTF-8, relative search paths), every query must give the
same objects both ways: same class, same slots (the distribution's path,
name, version, stamp, nothing materialised), the distribution shared by its
entry points alike (same reference counts), and the same behaviour (equal,
hashable, picklable, `dist` materialised).  Binding must refuse classes it
cannot write, and a refused binding must leave entry_points() on the Python
path with the same answers.  Fresh interpreters; failures name the seed.
"""

import os
import random

import pytest

from pyfixtures import make_dist, random_sites, run_json

SEEDS = int(os.environ.get("EPLOAD_RANDOM_TREES", "8"))

BODY = r'''
import gc, json, pickle, sys
import epload
import epload._entry_points as E

decline = sys.argv[2] == "decline"
if decline:
    import epload._native as N
    N.bind_classes = lambda a, b: False  # as for classes it cannot write

GROUPS = ("torch.backends", "console_scripts", "other")


def slots(ep):
    d = ep._dist
    return [type(ep).__name__, ep.name, ep.value, ep.group, type(d).__name__, d.path, d.name,
            d.version, d.stamp, d._real is None, sys.getrefcount(d)]


def both(group):
    """(native, python) lists for one group (None: all groups)."""
    groups = None if group is None else (group,)
    got = E._query(groups, objects=True)
    assert got is not None, "delegated to importlib"
    dists, rows = got
    native = rows if dists is None else None
    python = E._build(*E._query(groups))
    return native, python


out = {"groups": {}}
for group in (None,) + GROUPS:
    native, python = both(group)
    key = group or "*"
    if native is None:
        out["groups"][key] = {"native": None}
        continue
    assert native == python, key
    assert [hash(e) for e in native] == [hash(e) for e in python], key
    again = pickle.loads(pickle.dumps(native))
    assert again == native, key
    out["groups"][key] = {"native": [slots(e) for e in native],
                          "python": [slots(e) for e in python],
                          # Made natively, they are left to reference counting
                          # alone: no cycle can run through them.
                          "tracked": sum(gc.is_tracked(e) + gc.is_tracked(e._dist)
                                         for e in native)}
    if native:
        # Materialised on use, as importlib's distribution.
        e = native[-1]
        out["groups"][key]["dist"] = [e.dist.name, e.dist.version, e._dist._real is not None,
                                      gc.is_tracked(e._dist)]
# The public call takes the native path (or, declined, the Python one).
eps = epload.entry_points(group="torch.backends")
out["public"] = [slots(e) for e in eps]
out["public_python"] = [slots(e) for e in E._build(*E._query(("torch.backends",)))]
print(json.dumps(out))
'''


def draw(rng, root):
    def add(site, k, name):
        groups = {}
        for g in ("torch.backends", "console_scripts", "other"):
            if rng.random() < 0.6:
                groups[g] = [f"ep{rng.randrange(20)} = mod{k}:f{j} [x]" if rng.random() < 0.2
                             else f"ep{rng.randrange(20)} = mod{k}.sub:f{j}"
                             for j in range(rng.choice([1, 1, 2, 3]))]
        kind = "egg-info" if rng.random() < 0.2 else "dist-info"
        dirname = None
        if rng.random() < 0.1:
            dirname = f"{name}-1.{k}\udce9.dist-info"  # byte 0xe9: not UTF-8 on disk
        make_dist(site, name, f"1.{k}", groups, kind=kind, dirname=dirname)
    return random_sites(rng, root, add)


def run(tmp_path, seed, mode="bind", relative=False):
    rng = random.Random(seed)
    sites = draw(rng, tmp_path)
    code = f"import sys; sys.argv[1:] = [{str(seed)!r}, {mode!r}]\n"
    if relative:
        code += f"sys.path[1:1] = {[s.name for s in sites]!r}\n"
        sites = []
    return run_json(tmp_path, code + BODY, pythonpath=[str(s) for s in sites])


def check(got, seed, native_expected):
    for key, g in got["groups"].items():
        if native_expected:
            assert g["native"] is not None, f"seed {seed}: {key}: the native objects were not made"
            assert g["native"] == g["python"], f"seed {seed}: {key}"
            assert g["tracked"] == 0, f"seed {seed}: {key}: native objects tracked by the gc"
            if "dist" in g:
                assert g["dist"][2], f"seed {seed}: {key}: dist not materialised"
                assert not g["dist"][3], f"seed {seed}: {key}: tracked once materialised"
        else:
            assert g["native"] is None, f"seed {seed}: {key}: made natively though declined"
    assert got["public"] == got["public_python"], f"seed {seed}"


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_native_objects_equal_the_python_ones(seed, relative, tmp_path):
    got = run(tmp_path, seed, relative=relative)
    check(got, seed, True)
    # Something was compared.
    assert any(g["native"] for g in got["groups"].values()), f"seed {seed}: empty trees"


def test_declined_binding_keeps_the_python_path(tmp_path):
    for seed in range(3):
        root = tmp_path / f"s{seed}"
        root.mkdir()
        check(run(root, seed, mode="decline"), seed, False)


def test_binding_refuses_classes_it_cannot_write(tmp_path):
    got = run_json(tmp_path, r'''
import json
import epload
import epload._entry_points as E
N = E._native_module()

class NoSlots:
    pass

class WrongSlots:
    __slots__ = ("name", "value", "group")

class Sub(E.EntryPoint):  # inherits the slots, but they are not its own
    __slots__ = ()

class WithDict:
    __slots__ = ("name", "value", "group", "_dist", "__dict__")

class Ref(E._DistRef):
    pass

res = {
    "not_a_class": N.bind_classes(1, E._DistRef),
    "no_slots": N.bind_classes(NoSlots, E._DistRef),
    "wrong_slots": N.bind_classes(WrongSlots, E._DistRef),
    "subclass": N.bind_classes(Sub, E._DistRef),
    "with_dict": N.bind_classes(WithDict, E._DistRef),
    "ref_with_dict": N.bind_classes(E.EntryPoint, Ref),
    "real": N.bind_classes(E.EntryPoint, E._DistRef),
}
# A refused binding changed nothing: the answers are still EntryPoint objects.
eps = epload.entry_points(group="console_scripts")
res["type"] = sorted({type(e).__name__ for e in eps})
print(json.dumps(res))
''')
    assert got == {"not_a_class": False, "no_slots": False, "wrong_slots": False,
                   "subclass": False, "with_dict": False, "ref_with_dict": False,
                   "real": True, "type": got["type"]}
    assert got["type"] in ([], ["EntryPoint"])


CHECK_BODY = r'''
import json, sys
from importlib.metadata import entry_points
import epload._entry_points as E

N = E._native_module()
status, reason, file, problem, dists, rows = N.query(
    list(sys.path), ("torch.backends",), "full", "", True, E._INTERPRETER, b"", True)
assert problem is None, problem
assert dists is None, "the objects were not made natively"
oracle = entry_points(group="torch.backends")
print(json.dumps({
    "status": status,
    "epload": [[e.name, e.value, e.group, e.dist.name] for e in rows],
    "importlib": [[e.name, e.value, e.group, e.dist.name] for e in oracle],
}))
'''


def test_objects_made_during_the_check_are_dropped_when_it_fails(tmp_path):
    # On a cache hit under `full` validation with enough watched files for
    # two threads, the EntryPoint objects are made while the other CPU stats
    # them (cache_overlap.hpp).  A file rewritten in place (same
    # size, mtime restored: only its ctime says so) fails the check: the
    # answer must then be the rescan's, never the objects made from the
    # stale index.  Fresh interpreters: the first writes the cache, the
    # others read it.
    import time
    site = tmp_path / "site"
    site.mkdir()
    for k in range(800):
        make_dist(site, f"dist{k:03d}", "1.0", {"torch.backends": [f"dev{k:03d} = mod{k:03d}:f"]})
    # The current directory is on sys.path (''): one of its own, which the
    # cache directory's creation does not change.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    time.sleep(0.05)  # older than the scan's clock tick: no stamp is racy

    def query():
        got = run_json(tmp_path, CHECK_BODY, pythonpath=[str(site)], cwd=cwd)
        assert got["epload"] == got["importlib"], got["status"]
        assert len(got["epload"]) == 800
        return got

    assert query()["status"] == "rebuilt"
    assert query()["status"] == "hit"
    # In place: same size, the old mtime put back.
    target = site / "dist417-1.0.dist-info" / "entry_points.txt"
    before = os.stat(target)
    target.write_text(target.read_text().replace("mod417:f", "mod417:g"))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(target).st_size == before.st_size
    got = query()
    assert got["status"] == "refreshed", "the changed ctime was not seen"
    assert ["dev417", "mod417:g", "torch.backends", "dist417"] in got["epload"]
    assert query()["status"] == "hit"

"""Randomized: lazy autoload gives every device PyTorch's own loop gives.

Each seed draws a few Python backends of the kinds that load cleanly
(registering when called, working at import, importing the host first,
defining the callable first), each with zero (a hook), one or two devices,
some declared in `epload.devices`, spread over several `sys.path`
directories.  Stock PyTorch's loop (pyfixtures.HOST_STYLES['pytorch'])
is the oracle: after `import fakehost`, `fakehost.<device>` is the module
object a backend registered.  epload's lazy autoload must give the same
object name for every device, looked up in a random order through
`fakehost.<device>` or `epload.device()`, on the first run (nothing learned)
and on the next (devices learned), and every hook must have run.  Fresh
interpreters throughout; failures name the seed.
"""

import json
import os
import random

import pytest

from pyfixtures import make_backend, make_host, run_py

SEEDS = int(os.environ.get("EPLOAD_RANDOM_TREES", "12"))
KINDS = ["normal", "import-work", "circular", "callable-first"]
BROKEN = ["import-error", "missing-attr", "not-callable", "raises"]

BODY = r'''
import json, sys
import fakehost
import epload
got = {}
for how, dev in json.loads(sys.argv[1]):
    try:
        obj = getattr(fakehost, dev) if how == "attr" else epload.device(dev)
        got[dev] = obj.__name__
    except Exception as e:
        got[dev] = "error: %s: %s" % (type(e).__name__, e)
calls = sorted(e[1] for e in fakehost._events if e[0] == "call")
print(json.dumps({"devices": got, "calls": calls}))
'''


def draw(rng, root, broken=0.0):
    """Writes the backends (a share `broken` of them failing to load);
    returns (sites, {device: backend}, hooks, {broken backend: its site})."""
    sites, owner, hooks, bad = [], {}, [], {}
    for i in range(rng.randrange(1, 7)):
        name = f"be_r{i}"
        devices = [f"{name}d{k}" for k in range(rng.choice([0, 1, 1, 2]))]
        site = root / f"site{len(sites)}"
        sites.append(site)
        kind = rng.choice(BROKEN) if rng.random() < broken else rng.choice(KINDS)
        make_backend(site, name, kind, devices=devices,
                     declare=bool(devices) and rng.random() < 0.4)
        for d in devices:
            owner[d] = name
        if kind in BROKEN:
            bad[name] = site
        elif not devices:
            hooks.append(name)
    return sites, owner, hooks, bad


def lookups(tmp_path, host, sites, order, cache=None):
    """Runs BODY in a fresh interpreter with `host` and `sites` on the path,
    looking the devices up as `order` says ([how, device], ...)."""
    code = BODY.replace("sys.argv[1]", repr(json.dumps(order)))
    env = {"EPLOAD_CACHE_DIR": str(cache)} if cache else None
    proc = run_py(tmp_path, code, pythonpath=[host, *sites], env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def lazy_runs(rng, tmp_path, sites, devices):
    """Makes the two hosts (PyTorch's loop, the oracle; epload's lazy
    autoload) and runs the lazy one twice (nothing learned, then devices
    learned), in random lookup orders.  Returns (oracle host directory,
    [(attempt, order, result) per lazy run])."""
    oracle_host, lazy_host = tmp_path / "host-pytorch", tmp_path / "host-lazy"
    make_host(oracle_host, "pytorch")
    make_host(lazy_host, "epload-lazy")
    runs = []
    for attempt in ("first run", "devices learned"):
        order = [[rng.choice(["attr", "device"]), d] for d in devices]
        rng.shuffle(order)
        runs.append((attempt, order, lookups(tmp_path, lazy_host, sites, order, tmp_path / "cache")))
    return oracle_host, runs


@pytest.mark.parametrize("seed", range(SEEDS))
def test_lazy_autoload_gives_what_pytorchs_loop_gives(seed, tmp_path):
    rng = random.Random(seed)
    sites, owner, hooks, _ = draw(rng, tmp_path)
    devices = sorted(owner)
    oracle_host, runs = lazy_runs(rng, tmp_path, sites, devices)
    want = lookups(tmp_path, oracle_host, sites, [["attr", d] for d in devices])["devices"]
    assert all(not v.startswith("error") for v in want.values()), want
    for attempt, order, got in runs:
        assert got["devices"] == want, f"seed {seed}, {attempt}: lookups {order}"
        assert set(hooks) <= set(got["calls"]), f"seed {seed}, {attempt}: hooks {hooks} did not all run"


@pytest.mark.parametrize("seed", range(SEEDS))
def test_broken_backends_fail_alone_in_lazy_mode(seed, tmp_path):
    """With some backends failing (import error, no such attribute, not
    callable, raising), PyTorch's loop fails `import fakehost` as a whole;
    lazy autoload must import it, give every device of the others exactly
    what PyTorch's loop gives without the broken ones, and fail the lookups
    of the broken ones' devices, naming the backend."""
    rng = random.Random(1000 + seed)
    sites, owner, hooks, bad = draw(rng, tmp_path, broken=0.4)
    devices = sorted(owner)
    broken_devices = {d for d, b in owner.items() if b in bad}
    oracle_host, runs = lazy_runs(rng, tmp_path, sites, devices)
    good_sites = [s for s in sites if s not in bad.values()]
    want = lookups(tmp_path, oracle_host, good_sites,
                   [["attr", d] for d in devices if d not in broken_devices])["devices"]
    for attempt, order, got in runs:
        for d in devices:
            if d in broken_devices:
                assert got["devices"][d].startswith("error") and owner[d] in got["devices"][d], \
                    f"seed {seed}, {attempt}: {d} of broken {owner[d]}: {got['devices'][d]}"
            else:
                assert got["devices"][d] == want[d], f"seed {seed}, {attempt}: {d}, lookups {order}"
        assert set(hooks) <= set(got["calls"]), f"seed {seed}, {attempt}: hooks {hooks} did not all run"

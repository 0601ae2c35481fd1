"""The cache never serves a stale answer: random sequences of installs,
removals, upgrades and in-place edits (same size, mtime restored) of a
generated tree, shadowing and unshadowing copies, search path entries that
disappear and come back, and files that are no distribution, each followed
at once by epload.entry_points() with the cache on (`full` validation, the
default) and by importlib.metadata, in this interpreter.  A stale cache file
is refreshed from its parts (only what changed is read again), so every
step also checks that refresh against importlib.  No sleeps between steps: changes made in the same clock tick
as the cache was written must be caught by the racy rule, not by luck.
Deterministic: fixed seeds (EPLOAD_RANDOM_TREES for more).
"""

import importlib
import os
import pathlib
import random
import shutil

import pytest

import test_differential_random as gen
import treekit
from same_answer import assert_same

SEQUENCES = max(1, int(os.environ.get("EPLOAD_RANDOM_TREES", "40")) // 4)


# Each test with a cache of its own (conftest.private_cache).
pytestmark = pytest.mark.usefixtures('private_cache')


def metadata_dirs(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += [os.path.join(p, n) for n in sorted(os.listdir(p))
                    if os.path.isdir(os.path.join(p, n)) and n.lower().endswith(('.dist-info', '.egg-info'))]
    return out


def rewrite_in_place(path, data):
    """Same size if possible, mtime restored: only ctime tells."""
    st = os.stat(path)
    with open(path, 'r+b') as f:
        f.truncate(0)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def step(rng, paths, counter):
    dirs = metadata_dirs(paths)
    sites = [p for p in paths if os.path.isdir(p) and os.path.basename(p).startswith('site')]
    kind = rng.choice(['edit', 'edit', 'install', 'remove', 'upgrade', 'drop-eps', 'add-eps', 'nothing',
                       'shadow', 'unshadow', 'path-away', 'path-back', 'junk'])
    if kind in ('edit', 'drop-eps', 'add-eps', 'remove', 'upgrade', 'shadow', 'unshadow') and not dirs:
        kind = 'install'
    if kind in ('install', 'shadow') and not sites:
        kind = 'path-back'
    if kind in ('shadow', 'unshadow', 'path-away', 'path-back', 'junk'):
        return shape_step(rng, paths, dirs, sites, counter, kind)
    if kind == 'edit':
        d = rng.choice(dirs)
        eps = os.path.join(d, 'entry_points.txt')
        if not os.path.exists(eps):
            return 'nothing'
        old = open(eps, 'rb').read()
        new = gen.entry_points_text(rng, None)
        if len(new) >= len(old) > 0:
            new = new[:len(old)]  # same size when it can be
        rewrite_in_place(eps, new)
    elif kind == 'install':
        site = rng.choice(sites)
        name = f"new{counter}"
        d = treekit.dist(pathlib.Path(site), f"{name}-1.0.dist-info",
                         metadata=f"Name: {name}\nVersion: 1.0\n")
        treekit.write(d / 'entry_points.txt', gen.entry_points_text(rng, None))
    elif kind == 'remove':
        shutil.rmtree(rng.choice(dirs))
    elif kind == 'upgrade':
        d = rng.choice(dirs)
        head, tail = os.path.split(d)
        stem, dot, ext = tail.rpartition('.')
        name = stem.partition('-')[0]
        target = os.path.join(head, f"{name}-9.{counter}.{ext}")
        if os.path.exists(target):
            return 'nothing'
        os.rename(d, target)
        for meta in ('METADATA', 'PKG-INFO'):
            m = os.path.join(target, meta)
            if os.path.exists(m):
                text = open(m, encoding='utf-8', errors='replace').read()
                lines = [ln for ln in text.split('\n') if not ln.lower().startswith('version:')]
                lines.insert(1, f"Version: 9.{counter}")
                with open(m, 'w', encoding='utf-8') as f:
                    f.write('\n'.join(lines))
    elif kind == 'drop-eps':
        eps = os.path.join(rng.choice(dirs), 'entry_points.txt')
        if os.path.exists(eps):
            os.unlink(eps)
    elif kind == 'add-eps':
        eps = os.path.join(rng.choice(dirs), 'entry_points.txt')
        if not os.path.exists(eps):
            treekit.write(pathlib.Path(eps), gen.entry_points_text(rng, None))
    return kind


def shape_step(rng, paths, dirs, sites, counter, kind):
    """The changes that move distributions between search path entries or
    touch an entry without touching a distribution."""
    if kind == 'shadow':
        # A copy of a distribution in an earlier entry than its own: the
        # earlier one wins from now on, the later one is no longer read.
        d = rng.choice(dirs)
        later = os.path.dirname(d)
        earlier = [p for p in sites if paths.index(p) < paths.index(later)] if later in paths else []
        if not earlier:
            return 'nothing'
        target = os.path.join(rng.choice(earlier), os.path.basename(d))
        if os.path.exists(target):
            return 'nothing'
        shutil.copytree(d, target)
        eps = os.path.join(target, 'entry_points.txt')
        treekit.write(pathlib.Path(eps), gen.entry_points_text(rng, None))
    elif kind == 'unshadow':
        # The first copy of a name that has another copy later goes away.
        by_name = {}
        for d in dirs:
            by_name.setdefault(os.path.basename(d).lower().partition('-')[0], []).append(d)
        twins = [ds for ds in by_name.values() if len(ds) > 1]
        if not twins:
            return 'nothing'
        shutil.rmtree(rng.choice(twins)[0])
    elif kind == 'path-away':
        site = rng.choice(sites) if sites else None
        if site is None or os.path.exists(site + '.away'):
            return 'nothing'
        os.rename(site, site + '.away')
    elif kind == 'path-back':
        away = [p for p in paths if os.path.isdir(p + '.away') and not os.path.exists(p)]
        if not away:
            return 'nothing'
        site = rng.choice(away)
        os.rename(site + '.away', site)
    elif kind == 'junk':
        # What a script's directory sees between runs: a log, a checkpoint.
        if not sites:
            return 'nothing'
        treekit.write(pathlib.Path(rng.choice(sites)) / f'output{counter}.log', 'not a distribution')
    return kind


@pytest.mark.parametrize('seed', range(SEQUENCES))
def test_cached_answers_follow_random_changes(tmp_path, seed):
    rng = random.Random(1000 + seed)
    paths = gen.build_paths(rng, tmp_path)
    group = 'torch.backends'
    assert_same(paths)
    for counter in range(25):
        kind = step(rng, paths, counter)
        # importlib keeps directory listings keyed by the directory's mtime;
        # the oracle must not depend on the clock's granularity either.
        importlib.invalidate_caches()
        try:
            assert_same(paths)
            assert_same(paths, group=group)
        except AssertionError as e:
            raise AssertionError(f'seed {seed}, step {counter} ({kind}): {e}') from None


def importlib_rows(paths):
    """importlib.metadata's answer for `paths`, in the shape run_epload gives
    (in this interpreter: cheaper than the oracle's subprocess)."""
    import importlib.metadata as im
    import itertools
    import sys
    saved = sys.path[:]
    sys.path[:] = paths
    try:
        eps = im.entry_points()
    except Exception:  # noqa: BLE001 - importlib raising is an answer
        return None
    finally:
        sys.path[:] = saved
    rows = []
    # As conftest.ORACLE: 3.11's order on every interpreter (the CLI's).
    flat = itertools.chain.from_iterable(dict.values(eps)) if isinstance(eps, dict) else eps
    for ep in sorted(flat, key=lambda ep: ep.group):
        # Exactly what the CLI reports: METADATA's Name and Version, "" for
        # either when importlib raises reading them (undecodable METADATA).
        rows.append([ep.group, ep.name, ep.value, or_empty(lambda: ep.dist.name),
                     or_empty(lambda: ep.dist.version)])
    return rows


def or_empty(read):
    """read(), or '' where it is None or raises."""
    try:
        return read() or ''
    except Exception:  # noqa: BLE001 - importlib raising is an answer
        return ''


@pytest.mark.parametrize('seed', range(max(1, SEQUENCES // 2)))
def test_cli_cache_file_follows_random_changes(tmp_path, seed, epload_bin):
    # The same through `epload entry-points` with its cache file: every call
    # is a new process that reads the file and checks it (the watched names
    # and their digest, the early check on the second CPU).
    rng = random.Random(2000 + seed)
    paths = gen.build_paths(rng, tmp_path)
    cache = str(tmp_path / 'cache')

    refreshed = 0
    for counter in range(15):
        kind = step(rng, paths, counter) if counter else 'first'
        importlib.invalidate_caches()
        want = importlib_rows(paths)
        got, how = run_epload_cached(epload_bin, paths, cache)
        assert got == want, f'seed {seed}, step {counter} ({kind}): {how}'
        refreshed += 'cache refreshed' in how
    # The steps change the tree under a cache file that is there: they are
    # answered by refreshes (a scan only where importlib raises, which is
    # never cached, or where a refresh cannot be had).
    assert refreshed > 0, f'seed {seed}: no step was answered by a refresh'


def run_epload_cached(exe, paths, cache):
    """(rows or None where epload exits 1, its --verbose report)."""
    import json
    import subprocess
    argv = [exe, 'entry-points', '--json', '--verbose', f'--cache-dir={cache}'] + [f'--path={p}' for p in paths]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode == 1:
        return None, p.stderr
    assert p.returncode == 0, p.stderr
    # null where importlib raises reading them (an unreadable METADATA): '' as in the oracle
    return [[e['group'], e['name'], e['value'], e['dist'] or '', e['version'] or ''] for e in json.loads(p.stdout)], p.stderr

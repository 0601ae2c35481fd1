"""epload.distributions() against importlib.metadata.distributions(), in this
interpreter: the same PathDistribution objects (type, metadata path, order,
shadowed copies and egg-info included) and, for each, the same entry points
(types, order, ep.dist), on crafted trees, random trees, random sequences of
changes, with importlib's context arguments; importlib answering where the
index cannot promise the exact answer, and saying why under EPLOAD_DEBUG."""

import importlib.metadata as im
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys

import pytest

import difftrees
import epload
import test_cache_random as changes
import test_differential_random as gen
from epload._distributions import _importlib_distributions, _importlib_function
from same_walk import assert_same_walk, search_path

pytestmark = pytest.mark.usefixtures('private_cache')


_opened = None  # the files opened while a list is here (an audit hook records them)


def _audit(event, args):
    if event == 'open' and _opened is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


def answered_from_index(get_entry_points):
    """True when ``get_entry_points()`` answered without opening an
    ``entry_points.txt`` (importlib opens and parses the file at every access)."""
    global _opened
    _opened = []
    try:
        try:
            get_entry_points()
        except Exception:  # noqa: BLE001 - importlib's own error for a malformed file
            pass
        return not any(os.path.basename(f) == 'entry_points.txt' for f in _opened)
    finally:
        _opened = None


def served(paths):
    """How many distributions of a walk answer ``entry_points`` from the
    index, i.e. without opening their ``entry_points.txt``."""
    with search_path(paths):
        return sum(answered_from_index(lambda d=d: d.entry_points) for d in list(epload.distributions()))


def dist(site, dirname, eps=None, name=None):
    d = difftrees.dist(site, dirname, metadata=f"Name: {name or dirname.split('-')[0]}\nVersion: 1.0\n")
    if eps is not None:
        difftrees.write(d / 'entry_points.txt', eps)
    return d


def test_walk_matches_importlib_and_is_served(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[console_scripts]\na = m:f\n[pytest11]\np = plug\n')
    dist(site, 'b-1.0.dist-info', '[pytest11]\nq = other:x [extra]\n')
    dist(site, 'c-1.0.dist-info')
    ours = assert_same_walk([site])
    assert len(ours[2]) == 3
    assert served([site]) == 3


def test_sections_out_of_order_and_repeated_keep_the_files_order(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[zeta]\nz = m:z\n[alpha]\na = m:a\n')
    dist(site, 'b-1.0.dist-info', '[g]\nx = m:x\n[h]\ny = m:y\n[g]\nz = m:z\n')
    dist(site, 'c-1.0.dist-info', '[a]\nx = m:x\n[b]\ny = m:y\n')
    assert_same_walk([site])
    assert served([site]) == 3


def test_shadowed_copies_are_yielded_and_read_by_importlib(tmp_path):
    first, second = tmp_path / 's1', tmp_path / 's2'
    first.mkdir()
    second.mkdir()
    dist(first, 'a-1.0.dist-info', '[g]\nx = first:x\n')
    dist(second, 'a-2.0.dist-info', '[g]\nx = second:x\n')
    dist(second, 'A-3.0.dist-info', '[g]\nx = third:x\n')
    ours = assert_same_walk([first, second])
    assert len(ours[2]) == 3
    # The first copy is the index's; the shadowed ones are read by importlib.
    assert served([first, second]) == 1
    # The same directory twice on the path: every copy of it is yielded.
    assert len(assert_same_walk([first, first])[2]) == 2


def test_context_arguments(tmp_path):
    site, other = tmp_path / 'site', tmp_path / 'other'
    site.mkdir()
    other.mkdir()
    dist(site, 'Foo_Bar-1.0.dist-info', '[g]\nx = m:x\n')
    dist(site, 'foo.bar-2.0.dist-info', '[g]\nx = m:y\n')
    dist(site, 'baz-1.0.egg-info', '[g]\nz = m:z\n')
    dist(other, 'qux-1.0.dist-info', '[g]\nq = m:q\n')
    with search_path([site]):
        for name in ('foo-bar', 'FOO_BAR', 'foo.bar', 'baz', 'nope', '', None):
            assert_same_walk(name=name)
        for path in ([str(other)], [str(other), str(site)], [], (str(site),)):
            assert_same_walk(path=path)
            assert_same_walk(path=path, name='qux')
        # Handed to importlib: what it raises or ignores, it does.
        assert_same_walk(path=None)
        assert_same_walk(path=[other])  # not a str: importlib's answer
        assert_same_walk(context=im.DistributionFinder.Context(name='baz'))
        assert_same_walk(context=im.DistributionFinder.Context(), name='baz')
        assert_same_walk(bogus=1)
        assert_same_walk(name=3)


def test_answer_is_lazy_like_importlibs(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    with search_path([]):
        ours, theirs = epload.distributions(), _importlib_distributions()
        assert type(ours) is type(theirs)
        sys.path[:] = [str(site)]
        assert [str(d._path) for d in ours] == [str(d._path) for d in theirs] != []


def test_relative_and_empty_entries(tmp_path, monkeypatch):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    # Sections out of order: the walk reads this file, relative to its path.
    dist(site, 'b-1.0.dist-info', '[h]\ny = m:y\n[g]\nz = m:z\n')
    monkeypatch.chdir(tmp_path)
    assert_same_walk(['site', 'site/', './site', ''])
    assert served(['site', 'site/']) == 2
    monkeypatch.chdir(site)
    assert_same_walk([''])
    assert served(['']) == 2


def test_a_first_path_that_holds_nothing_keeps_every_distribution_where_it_is(tmp_path, monkeypatch):
    # The index leaves such a first path (the working directory, a script's
    # directory) out of its key and its paths: the walk must still put each
    # distribution under its own path entry, for '' and an absolute one.
    empty = tmp_path / 'empty'
    empty.mkdir()
    sites = [tmp_path / 'site1', tmp_path / 'site2']
    for n, site in enumerate(sites):
        site.mkdir()
        dist(site, f'p{n}-1.0.dist-info', f'[g]\nx{n} = m:x\n')
    ours = assert_same_walk([empty, *sites])
    assert len(ours[2]) == 2
    assert served([empty, *sites]) == 2
    monkeypatch.chdir(empty)
    assert_same_walk(['', *sites])
    assert served(['', *sites]) == 2


@pytest.mark.parametrize('name', sorted(difftrees.CASES))
def test_difftree_case(tmp_path, monkeypatch, name):
    root = tmp_path / 'tree'
    root.mkdir()
    case = difftrees.CASES[name](root)
    if case.skip:
        pytest.skip(case.skip)
    if case.cwd:
        monkeypatch.chdir(case.cwd)
    assert_same_walk(case.paths)


@pytest.mark.parametrize('seed', range(gen.TREES))
def test_random_tree(seed, tmp_path):
    paths = gen.build_paths(random.Random(seed), tmp_path)
    assert_same_walk(paths)


@pytest.mark.parametrize('seed', range(changes.SEQUENCES))
def test_random_changes(tmp_path, seed):
    rng = random.Random(seed)
    paths = gen.build_paths(rng, tmp_path)
    assert_same_walk(paths)
    counter = [0]
    for _ in range(12):
        changes.step(rng, paths, counter)
        assert_same_walk(paths)


def test_foreign_finder_and_odd_paths_go_to_importlib(tmp_path, monkeypatch, capsys):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    monkeypatch.setenv('EPLOAD_DEBUG', '1')

    class Finder:
        def find_spec(self, *a):
            return None

        def find_distributions(self, context=None):
            return iter(())

    monkeypatch.setattr(sys, 'meta_path', [Finder()] + sys.meta_path)
    assert_same_walk([site])
    assert served([site]) == 0
    assert 'another distribution finder' in capsys.readouterr().err
    monkeypatch.setattr(sys, 'meta_path', sys.meta_path[1:])
    with search_path([site]):
        sys.path.append(b'/bytes')
        assert assert_same_walk()[0] == 'raise'  # importlib's own error
        sys.path[-1] = site  # a Path: importlib lists it
        assert len(assert_same_walk()[2]) == 2
        assert not any(answered_from_index(lambda d=d: d.entry_points) for d in list(epload.distributions()))
    assert 'not a plain path string' in capsys.readouterr().err


def test_malformed_metadata_anywhere_goes_to_importlib(tmp_path, monkeypatch, capsys):
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    dist(site, 'b-1.0.dist-info', '[g]\nno equals sign\n')
    monkeypatch.setenv('EPLOAD_DEBUG', '1')
    assert assert_same_walk([site])[0] == 'ok'
    assert served([site]) == 0
    assert 'using importlib.metadata' in capsys.readouterr().err


def test_zip_archive_goes_to_importlib(tmp_path):
    import zipfile
    archive = tmp_path / 'dists.zip'
    with zipfile.ZipFile(archive, 'w') as z:
        z.writestr('a-1.0.dist-info/METADATA', 'Name: a\nVersion: 1.0\n')
        z.writestr('a-1.0.dist-info/entry_points.txt', '[g]\nx = m:x\n')
    ours = assert_same_walk([archive])
    assert ours[2][0][2] == 'Path'  # zipfile.Path, as importlib makes it


def test_entry_points_file_edited_after_the_walk_is_read_by_the_next(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    d = dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    with search_path([site]):
        first = list(epload.distributions())
        difftrees.write(d / 'entry_points.txt', '[g]\nx = m:x\ny = m:y\n')
        assert [ep.name for ep in first[0].entry_points] == ['x']
        assert [ep.name for ep in list(epload.distributions())[0].entry_points] == ['x', 'y']
    assert_same_walk([site])


def test_other_distributions_keep_importlibs_property(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    d = dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    with search_path([site]):
        list(epload.distributions())  # the property is in place from now on
    plain = im.PathDistribution(d)
    assert [(ep.name, ep.dist is plain) for ep in plain.entry_points] == [('x', True)]
    assert 'entry_points' not in vars(im.PathDistribution)
    assert im.Distribution.entry_points.__doc__ == im.Distribution.entry_points.fget.__doc__


def test_walk_objects_do_everything_else_as_importlib(tmp_path):
    site = tmp_path / 'site'
    site.mkdir()
    d = dist(site, 'a-1.0.dist-info', '[pytest11]\np = plug\n', name='a')
    difftrees.write(d / 'RECORD', 'a/__init__.py,,\n')
    with search_path([site]):
        ours = list(epload.distributions())[0]
        theirs = list(im.PathDistribution(d) for _ in (0,))[0]
        for attr in ('name', 'version', 'requires', '_normalized_name'):
            assert getattr(ours, attr) == getattr(theirs, attr)
        assert ours.metadata['Name'] == 'a'
        assert [str(f) for f in ours.files] == [str(f) for f in theirs.files]
        assert ours.read_text('RECORD') == theirs.read_text('RECORD')
        assert ours.locate_file('x') == theirs.locate_file('x')
        eps = ours.entry_points
        assert list(eps) == list(theirs.entry_points)
        assert eps['p'].dist is ours
        assert eps.select(group='pytest11').names == {'p'}


def test_a_later_patch_of_importlib_wins(tmp_path, monkeypatch):
    from epload import _importlib_hook
    if not _importlib_hook.installed():
        monkeypatch.setattr(im, 'distributions', epload.distributions)
    assert im.distributions is epload.distributions

    def fake(**kwargs):
        return iter(['patched'])

    monkeypatch.setattr(im, 'distributions', fake)
    assert list(im.distributions()) == ['patched']


def test_distribution_by_name_matches_importlib(tmp_path, monkeypatch):
    first, second = tmp_path / 's1', tmp_path / 's2'
    first.mkdir()
    second.mkdir()
    dist(first, 'Foo_Bar-1.0.dist-info', '[g]\nx = m:x\n[a]\ny = m:y\n')
    dist(second, 'foo.bar-2.0.dist-info', '[g]\nx = m:z\n')
    dist(second, 'baz-1.0.egg-info', '[g]\nz = m:z\n')
    egg = tmp_path / 'qux-1.0-py3.11.egg'
    difftrees.write(egg / 'EGG-INFO' / 'PKG-INFO', 'Name: qux\nVersion: 1.0\n')
    difftrees.write(egg / 'EGG-INFO' / 'entry_points.txt', '[g]\nq = m:q\n')
    theirs = _importlib_function('distribution')

    def outcome(fn, name):
        try:
            d = fn(name)
        except Exception as e:  # noqa: BLE001 - the exception is the answer
            return ('raise', type(e).__name__, str(e))
        return ('ok', type(d).__name__, str(d._path), d.version,
                [(ep.name, ep.value, ep.group, ep.dist is d) for ep in d.entry_points])

    with search_path([first, second, egg]):
        for name in ('foo-bar', 'FOO.BAR', 'baz', 'qux', 'QUX', 'nope', '', None, 3):
            assert outcome(epload.distribution, name) == outcome(theirs, name)
        # importlib's module functions call the module's `distribution`.
        monkeypatch.setattr(im, 'distribution', epload.distribution)
        assert im.version('foo-bar') == '1.0'
        assert im.metadata('baz')['Name'] == 'baz'
        with pytest.raises(im.PackageNotFoundError):
            im.version('nope')
    assert served([first]) == 1


def test_distribution_by_name_after_a_walk_sees_every_change(tmp_path):
    """After a walk, a lookup by name is answered from the listings the
    search paths' stamps vouch for, and its entry points are read from the
    file when asked: an edit that keeps the file's size and times, a new
    distribution, a removed one and a file made malformed are all seen."""
    site = tmp_path / 'site'
    site.mkdir()
    a = dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n[f]\ny = m:y\n')
    b = dist(site, 'b-1.0.dist-info', '[g]\nz = m:z\n')
    dist(site, 'c-1.0.dist-info', '[g]\nc = m:c\n')
    theirs = _importlib_function('distribution')

    def outcome(fn, name):
        try:
            d = fn(name)
            return ('ok', type(d).__name__, str(d._path), d.version,
                    [(ep.name, ep.value, ep.group, ep.dist is d) for ep in d.entry_points])
        except Exception as e:  # noqa: BLE001 - the exception is the answer
            return ('raise', type(e).__name__, str(e))

    def same(*names):
        for name in names:
            assert outcome(epload.distribution, name) == outcome(theirs, name)
            assert_same_walk([site], name=name)

    def carries_rows(name):
        d = epload.distribution(name)
        return answered_from_index(lambda: d.entry_points)

    with search_path([site]):
        list(epload.distributions())  # the index is held from now on
        same('a', 'b', 'c', 'n')
        assert not carries_rows('a')  # by the listing: importlib reads the file
        # Edits in place, the search path's listing unchanged.
        eps = a / 'entry_points.txt'
        st = eps.stat()
        eps.write_text('[g]\nq = m:q\n[f]\nr = m:r\n')  # same size and times
        os.utime(eps, ns=(st.st_atime_ns, st.st_mtime_ns))
        (site / 'c-1.0.dist-info' / 'entry_points.txt').write_text('[g]\nno equals sign\n')
        assert [ep.name for ep in epload.distribution('a').entry_points] == ['q', 'r']
        same('a', 'b', 'c', 'n')
        # The listing changed.
        dist(site, 'n-1.0.dist-info', '[g]\nn = m:n\n')
        shutil.rmtree(b)
        same('a', 'b', 'c', 'n')
        assert epload.distribution('n').version == '1.0'
        with pytest.raises(im.PackageNotFoundError):
            epload.distribution('b')
    assert_same_walk([site])


def test_without_the_native_module_importlib_answers(tmp_path):
    """An install whose native module cannot load (here: not there at all)
    walks with importlib's own code, and says why under EPLOAD_DEBUG."""
    package = pathlib.Path(epload.__file__).parent
    copy = tmp_path / 'pkg' / 'epload'
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns('_native*', '__pycache__'))
    site = tmp_path / 'site'
    site.mkdir()
    dist(site, 'a-1.0.dist-info', '[g]\nx = m:x\n')
    code = ('import json, sys, epload, importlib.metadata as im\n'
            f'sys.path[:] = [{str(site)!r}]\n'
            'rows = lambda ds: [(str(d._path), [(e.name, e.dist is d) for e in d.entry_points]) for d in ds]\n'
            'print(json.dumps([rows(epload.distributions()), rows(im.distributions())]))\n')
    env = dict(os.environ, PYTHONPATH=str(copy.parent), EPLOAD_DEBUG='1')
    proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ours, theirs = json.loads(proc.stdout)
    assert ours == theirs and ours[0][1] == [['x', True]]
    assert "native module cannot load here" in proc.stderr, proc.stderr

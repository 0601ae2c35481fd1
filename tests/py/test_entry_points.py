"""epload.entry_points() against importlib.metadata.entry_points() (the oracle),
in this interpreter, on crafted trees and on the real sys.path: same answer,
same order, same types of result, same exceptions, same EntryPoint behaviour
(the comparison: same_answer.py).
"""

import json
import importlib.metadata as im
import os
import pickle
import sys
import time
import warnings
import zipfile

import pytest

import epload
from pyfixtures import make_dist, run_py, write
from same_answer import assert_same, assert_same_everywhere, outcome, search_path


# Each test with a cache of its own (conftest.private_cache).
pytestmark = pytest.mark.usefixtures('private_cache')


# ---- crafted trees --------------------------------------------------------------

def test_groups_order_and_selection_match_importlib(tmp_path):
    s1, s2 = tmp_path / 's1', tmp_path / 's2'
    make_dist(s1, 'alpha', entry_points={
        'g2': ['a = mod_a:f', 'b = mod_b'],
        'g1': ['a = mod_a:f', 'z = pkg.mod:obj.attr [x, y]'],
        'console_scripts': ['alpha = alpha.cli:main'],
    })
    make_dist(s2, 'beta', '2.0', {'g1': ['a = other:f', 'b=mod_b:g'], 'g3': ['q = q']})
    assert_same_everywhere([s1, s2])
    assert_same_everywhere([s2, s1])


def test_parsing_rules_match_importlib(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'parse', entry_points=(
        'ignored = before:any_section\n'
        '# a comment\n'
        '   [ spaced group ]  \n'
        'k = v = w\n'
        '  dup = one  \n'
        'dup = two\n'
        '\n'
        ';semi = colon\n'
        '[g1]\n'
        'x=mod_x:f    [ extra1 ,extra2 ]\n'
        'u\u00e9 = m\u00f6d:\u00e4ttr\n'
        '[G1]\n'
        'y = mod_y\n'
        '[empty]\n'))
    assert_same_everywhere([s])


def test_distribution_kinds_and_case_match_importlib(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'upper', dirname='Upper-1.0.DIST-INFO', entry_points={'g1': ['u = up:f']})
    make_dist(s, 'eggdir', kind='egg-info', entry_points={'g1': ['e = egg:f']})
    make_dist(s / 'legacy-3.0.egg', 'legacy', dirname='EGG-INFO', kind='egg-info',
              entry_points={'g1': ['l = legacy:f']})
    write(str(s / 'flat-1.0.egg-info'), 'Metadata-Version: 1.0\nName: flat\nVersion: 1.0\n')
    assert_same_everywhere([s, s / 'legacy-3.0.egg'])


def test_first_distribution_on_the_path_wins(tmp_path):
    s1, s2 = tmp_path / 's1', tmp_path / 's2'
    make_dist(s1, 'Foo_Bar', '1.0', {'g1': ['a = first:f']})
    make_dist(s2, 'foo.bar', '2.0', {'g1': ['a = second:f']})
    # A shadowed copy is never read: its errors never surface.
    make_dist(s2, 'foo_bar', '3.0', 'broken line without equals\n[g1]\nalso broken\n')
    # A dist-info without entry_points.txt still shadows a later one.
    make_dist(s1, 'quiet', '1.0', None)
    make_dist(s2, 'quiet', '2.0', {'g1': ['q = shadowed:f']})
    out = assert_same([s1, s2], group='g1')
    assert [ep[1] for ep in out[1][1]] == ['first:f']


@pytest.mark.parametrize('text', [
    b'[g1]\nno equals sign here\n',
    b'[g1]\na = \xff\xfe invalid utf-8\n',
])
def test_malformed_entry_points_raise_like_importlib(tmp_path, text):
    s = tmp_path / 's'
    make_dist(s, 'good', entry_points={'g1': ['a = ok:f']})
    make_dist(s, 'bad', entry_points=text)
    for params in ({}, {'group': 'g1'}, {'group': 'unrelated'}, {'name': 'a'}):
        out = assert_same([s], **params)
        assert out[0] == 'raise'


def test_invalid_utf8_raises_a_real_unicode_decode_error(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'bad', entry_points=b'[g1]\na = \xff\n')
    with search_path([s]), pytest.raises(UnicodeDecodeError) as info:
        epload.entry_points(group='g1')
    assert info.value.reason == 'invalid start byte'


def test_distribution_without_a_name_raises_like_importlib(tmp_path):
    s = tmp_path / 's'
    egg = s / 'noname-1.0.egg'
    make_dist(egg, 'noname', dirname='EGG-INFO', kind='egg-info',
              metadata='Metadata-Version: 1.0\nVersion: 1.0\n', entry_points={'g1': ['a = m:f']})
    out = assert_same([s, egg], group='g1')
    assert out[:2] == ('raise', 'TypeError')


def test_missing_and_unreadable_paths_match_importlib(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'one', entry_points={'g1': ['a = m:f']})
    write(str(tmp_path / 'plainfile'), 'not a directory')
    assert_same_everywhere([tmp_path / 'missing', tmp_path / 'plainfile', s])


def test_sys_path_changes_between_calls(tmp_path):
    s1, s2 = tmp_path / 's1', tmp_path / 's2'
    make_dist(s1, 'one', entry_points={'g1': ['a = from_s1:f']})
    make_dist(s2, 'one', '2.0', {'g1': ['a = from_s2:f']})
    make_dist(s2, 'two', entry_points={'g1': ['b = from_s2:g']})
    assert_same([s1], group='g1')
    values = lambda out: sorted(ep[1] for ep in out[1][1])  # noqa: E731 (listing order varies)
    assert values(assert_same([s2, s1], group='g1')) == ['from_s2:f', 'from_s2:g']
    assert values(assert_same([s1, s2], group='g1')) == ['from_s1:f', 'from_s2:g']
    # In place: append to the live sys.path list between two calls.
    with search_path([s1]):
        assert [ep.value for ep in epload.entry_points(group='g1')] == ['from_s1:f']
        sys.path.append(str(s2))
        assert [ep.value for ep in epload.entry_points(group='g1')] == ['from_s1:f', 'from_s2:g']


def test_relative_entries_are_resolved_at_call_time(tmp_path, monkeypatch):
    a, b = tmp_path / 'a', tmp_path / 'b'
    make_dist(a, 'one', entry_points={'g1': ['x = in_a:f']})
    make_dist(b / 'sub', 'two', entry_points={'g1': ['y = in_b:f']})
    monkeypatch.chdir(a)
    assert_same_everywhere(['', 'sub'])
    monkeypatch.chdir(b)
    assert_same_everywhere(['', 'sub'])
    with search_path(['sub']):
        ep = epload.entry_points(group='g1')['y']
    monkeypatch.chdir(tmp_path)  # the dist stays the one found at call time
    assert ep.dist.name == 'two'


def test_validation_modes_give_the_same_answer(tmp_path, monkeypatch):
    s = tmp_path / 's'
    make_dist(s, 'one', entry_points={'g1': ['a = m:f']})
    for mode in ('full', 'paths'):
        monkeypatch.setenv('EPLOAD_VALIDATE', mode)
        assert_same([s], group='g1')
    # A bad value is a warning naming the variable and the accepted values
    # (the core's text, as the CLI prints it), and `full` applies.
    monkeypatch.setenv('EPLOAD_VALIDATE', 'sometimes')
    with search_path([s]), pytest.warns(RuntimeWarning, match=(
            "EPLOAD_VALIDATE='sometimes' is not one of full, paths: using full")):
        assert [ep.name for ep in epload.entry_points(group='g1')] == ['a']


def test_answer_follows_edits_in_place(tmp_path):
    s = tmp_path / 's'
    d = make_dist(s, 'one', entry_points={'g1': ['a = m:f']})
    assert assert_same([s], group='g1')[1][1][0][1] == 'm:f'
    write(os.path.join(d, 'entry_points.txt'), '[g1]\na = m:changed\n')
    assert assert_same([s], group='g1')[1][1][0][1] == 'm:changed'


# ---- the real environment ---------------------------------------------------------

def test_real_sys_path_matches_importlib():
    paths = list(sys.path)
    for params in ({}, {'group': 'console_scripts'}, {'group': 'pytest11'},
                   {'name': 'pytest'}, {'group': 'torch.backends'}):
        assert_same(paths, **params)


# ---- result objects -----------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'pkg', '1.2', {
        'g1': ['json = json:loads', 'path = os.path', 'x = pkg.mod:obj.attr [e1, e2]'],
        'g2': ['y = bad value!'],
    })
    with search_path([s]):
        yield s


def test_entry_point_api_matches_importlib(tree):
    ours = epload.entry_points(group='g1')
    theirs = im.entry_points(group='g1')
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert (a.name, a.value, a.group, a.module, a.attr, a.extras) == \
               (b.name, b.value, b.group, b.module, b.attr, b.extras)
        assert repr(a) == repr(b)
        assert a == b and b == a and hash(a) == hash(b)
        assert not (a != b)
        assert a.matches(group='g1') and not a.matches(group='g1', name='other')
        assert (a.dist.name, a.dist.version) == ('pkg', '1.2')
    assert {*ours} == {*theirs}
    assert sorted(ours) == sorted(theirs)
    assert ours.names == theirs.names and ours.groups == theirs.groups
    assert ours['json'].load() is theirs['json'].load()
    assert ours['path'].load() is os.path
    assert list(ours.select(name='x')) == list(theirs.select(name='x'))
    with pytest.raises(KeyError) as info:
        ours['absent']
    assert info.value.args == ('absent',)
    assert repr(ours) == repr(theirs)
    assert [c.__name__ for c in type(ours).__mro__] == \
           [c.__name__ for c in type(theirs).__mro__]  # a list (3.11) or a tuple
    # The tuple interface, as far as this interpreter keeps it (3.10: a
    # tuple; 3.11: deprecated index and item, 3.12: item only, 3.13: neither).
    first_ours, first_theirs = ours['json'], theirs['json']
    assert hasattr(first_ours, '__iter__') == hasattr(first_theirs, '__iter__')
    assert hasattr(first_ours, '__getitem__') == hasattr(first_theirs, '__getitem__')
    if hasattr(first_theirs, '__getitem__'):
        seen = []
        for ep in (first_ours, first_theirs):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                assert ep[:] == ('json', 'json:loads', 'g1')
            seen.append([w.category for w in caught])
        assert seen[0] == seen[1]
    if isinstance(theirs, list):
        with pytest.warns(DeprecationWarning):
            assert ours[0] == theirs[0]
    else:
        assert outcome(lambda: ours[0]) == outcome(lambda: theirs[0])


def test_entry_point_tuple_contract_matches_importlib(tree):
    # Python 3.10's EntryPoint is a named tuple: a tuple in every respect
    # (length, count, index, indexing without a warning) whose dist may be
    # set; 3.11 keeps a deprecated indexing, 3.12 and 3.13 none of it.
    ours = epload.entry_points(group='g1')['json']
    theirs = im.entry_points(group='g1')['json']
    assert isinstance(ours, tuple) == isinstance(theirs, tuple)
    for probe in (len, lambda ep: ep.count('json'), lambda ep: ep.index('g1'),
                  lambda ep: ep[1], lambda ep: ep[-1:], lambda ep: ep == ('json', 'json:loads', 'g1'),
                  lambda ep: ep < ('k',), lambda ep: hash(ep) == hash(('json', 'json:loads', 'g1')),
                  lambda ep: 'json:loads' in EntryPointsLike(ep)):
        with warnings.catch_warnings(record=True) as seen_ours:
            warnings.simplefilter('always')
            got_ours = result_of(probe, ours)
        with warnings.catch_warnings(record=True) as seen_theirs:
            warnings.simplefilter('always')
            got_theirs = result_of(probe, theirs)
        assert got_ours == got_theirs
        assert [w.category for w in seen_ours] == [w.category for w in seen_theirs]
    for name in ('dist', 'name'):
        a, b = epload.EntryPoint('n', 'm:a', 'g'), im.EntryPoint('n', 'm:a', 'g')
        assert result_of(setattr, a, name, None)[:2] == result_of(setattr, b, name, None)[:2]
    made = epload.EntryPoint('n', 'm:a', 'g')
    if result_of(setattr, made, 'dist', 'D')[0] == 'ok':  # 3.10: dist may be set
        assert made.dist == 'D'


class EntryPointsLike(tuple):
    """A container holding one entry point (``x in c`` compares with ==)."""

    def __new__(cls, ep):
        return super().__new__(cls, (ep,))


def result_of(fn, *args):
    """('ok', value) or ('raise', exception type name, text)."""
    try:
        return ('ok', fn(*args))
    except Exception as e:  # noqa: BLE001 - the exception is the answer
        return ('raise', type(e).__name__, str(e))


def test_entry_point_errors_match_importlib(tree):
    ours = epload.entry_points(group='g2')['y']
    theirs = im.entry_points(group='g2')['y']
    for attribute in ('module', 'attr', 'extras', 'load'):
        # AttributeError (None.group); from 3.13 on, AssertionError but for load().
        with pytest.raises((AttributeError, AssertionError)) as a:
            r = getattr(ours, attribute)
            r() if attribute == 'load' else None
        with pytest.raises((AttributeError, AssertionError)) as b:
            r = getattr(theirs, attribute)
            r() if attribute == 'load' else None
        assert (type(a.value), str(a.value)) == (type(b.value), str(b.value))
    def rename(ep):
        ep.name = 'other'
    # 3.10: a named tuple's field ("can't set attribute"); later: "immutable".
    assert result_of(rename, ours)[:2] == result_of(rename, theirs)[:2] == ('raise', 'AttributeError')
    with pytest.raises(ModuleNotFoundError):
        epload.EntryPoint('n', 'no_such_module_anywhere:f', 'g').load()
    assert outcome(epload.entry_points, module='x') == outcome(im.entry_points, module='x')


def test_entry_point_pickles_and_constructs_like_importlib(tree):
    ep = epload.entry_points(group='g1')['x']
    back = pickle.loads(pickle.dumps(ep))
    assert back == ep and type(back) is epload.EntryPoint
    assert back.dist.name == 'pkg'
    made = epload.EntryPoint(name='n', value='m:a', group='g')
    assert made == im.EntryPoint(name='n', value='m:a', group='g')
    assert made.dist is None
    assert pickle.loads(pickle.dumps(made)) == made


def test_no_params_gives_this_interpreters_type(tree):
    ours, theirs = epload.entry_points(), im.entry_points()
    assert type(ours).__name__ == type(theirs).__name__
    if sys.version_info >= (3, 12):
        assert type(ours).__name__ == 'EntryPoints' and isinstance(ours, tuple)
        assert list(ours.select(group='g1')) == list(theirs.select(group='g1'))
        assert ours.groups == theirs.groups and ours.names == theirs.names
        return
    assert type(ours).__name__ == 'SelectableGroups'
    assert ours.groups == theirs.groups and ours.names == theirs.names
    assert ours.select() is ours
    assert list(ours.select(group='g1')) == list(theirs.select(group='g1'))
    with pytest.warns(DeprecationWarning):
        assert list(ours['g1']) == list(theirs['g1'])
    with pytest.warns(DeprecationWarning):
        assert list(ours.keys()) == list(theirs.keys())


FIRST = object()  # stands for the first entry point of group g1


def plain(value):
    """``value`` with its collections, views and iterators made lists."""
    # An entry point is a value (3.10's iterates as (name, itself), a dict item).
    if isinstance(value, str) or type(value).__name__ == 'EntryPoint' or not hasattr(value, '__iter__'):
        return value
    return [plain(v) for v in value]


@pytest.mark.parametrize('kind, method, args', [
    ('list', '__setitem__', (0, None)), ('list', '__delitem__', (0,)), ('list', 'append', (None,)),
    ('list', 'reverse', ()), ('list', 'extend', ([None],)), ('list', 'pop', ()),
    ('list', 'remove', (FIRST,)), ('list', '__iadd__', ([None],)), ('list', 'insert', (0, None)),
    ('list', 'sort', ()), ('list', '__add__', ([None],)), ('list', '__eq__', ([],)),
    ('dict', '__getitem__', ('g1',)), ('dict', 'get', ('g1',)), ('dict', 'get', ('absent', 0)),
    ('dict', '__iter__', ()), ('dict', '__contains__', ('g1',)), ('dict', 'keys', ()),
    ('dict', 'values', ()),
])
def test_deprecated_list_and_dict_methods_warn_like_importlib(tree, kind, method, args):
    # Python 3.11's EntryPoints list and SelectableGroups dict: each method
    # warns as importlib's does (the same text, at the caller's line), then
    # does what the list or dict method does.
    if not isinstance(im.entry_points(), dict):
        pytest.skip('Python 3.12+: entry_points() has no list or dict interface')
    seen = []
    for entry_points in (epload.entry_points, im.entry_points):
        groups = entry_points()
        target = groups if kind == 'dict' else dict.__getitem__(groups, 'g1')
        first = list.__getitem__(dict.__getitem__(groups, 'g1'), 0)
        call_args = tuple(first if a is FIRST else a for a in args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            result = getattr(target, method)(*call_args)
        after = sorted(dict.keys(target)) if kind == 'dict' else plain(target)
        seen.append(([(w.category, str(w.message), w.filename) for w in caught], plain(result), after))
    assert seen[0] == seen[1]
    assert seen[0][0] and all(w[2] == __file__ for w in seen[0][0])


# ---- delegation to importlib ---------------------------------------------------------

def test_other_distribution_finder_is_honoured(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'real', entry_points={'g1': ['a = real:f']})
    extra = tmp_path / 'extra'
    make_dist(extra, 'virtual', entry_points={'g1': ['v = virtual:f']})
    code = f'''
import sys, json, importlib.metadata as im
class Finder:
    @staticmethod
    def find_spec(*a, **k):
        return None
    @staticmethod
    def find_distributions(context=im.DistributionFinder.Context()):
        return [im.PathDistribution(__import__("pathlib").Path({str(extra)!r}) / "virtual-1.0.dist-info")]
sys.meta_path.insert(0, Finder)
sys.path[:0] = [{str(s)!r}]
import epload
ours = [(e.name, e.value) for e in epload.entry_points(group="g1")]
theirs = [(e.name, e.value) for e in im.entry_points(group="g1")]
print(json.dumps([ours, theirs]))
'''
    proc = run_py(tmp_path, code, env={'EPLOAD_DEBUG': '1'})
    import json
    ours, theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ours == theirs and ['v', 'virtual:f'] in ours
    assert 'using importlib.metadata: sys.meta_path holds another distribution finder' in proc.stderr


def test_zip_on_the_path_is_answered_exactly(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'plain', entry_points={'g1': ['a = plain:f']})
    archive = tmp_path / 'bundle.zip'
    with zipfile.ZipFile(archive, 'w') as z:
        z.writestr('zipped-1.0.dist-info/METADATA', 'Name: zipped\nVersion: 1.0\n')
        z.writestr('zipped-1.0.dist-info/entry_points.txt', '[g1]\nz = zipped:f\n')
    out = assert_same([archive, s], group='g1')
    assert [ep[0] for ep in out[1][1]] == ['z', 'a']


@pytest.mark.parametrize('order', ['importlib_first', 'epload_first'])
def test_importlib_entry_points_may_be_replaced_by_epload(tmp_path, order):
    # importlib.metadata.entry_points = epload.entry_points: a call epload
    # hands back (a zip with a distribution, a malformed file) goes to
    # importlib's original, never to itself.  Kept at import when importlib.metadata
    # is already there, else made again from its code.
    s = tmp_path / 's'
    make_dist(s, 'plain', entry_points={'g1': ['a = plain:f']})
    bad = tmp_path / 'bad'
    make_dist(bad, 'broken', entry_points=b'[g1]\nno equals\n')
    archive = tmp_path / 'bundle.zip'
    with zipfile.ZipFile(archive, 'w') as z:
        z.writestr('zipped-1.0.dist-info/METADATA', 'Name: zipped\nVersion: 1.0\n')
        z.writestr('zipped-1.0.dist-info/entry_points.txt', '[g1]\nz = zipped:f\n')
    first = 'import importlib.metadata as md\nimport epload' if order == 'importlib_first' \
        else 'import epload, epload._entry_points\nimport importlib.metadata as md'
    code = f'''
import sys, json
{first}
from epload import _entry_points as eps
original = md.entry_points
md.entry_points = epload.entry_points
sys.path[:0] = [{str(archive)!r}, {str(s)!r}]
zipped = [e.name for e in md.entry_points(group="g1")]
sys.path[:2] = [{str(bad)!r}]
raised = []
for f in (md.entry_points, original):
    try:
        f(group="g1")
        raised.append(None)
    except Exception as e:
        raised.append(type(e).__name__)
kept = eps._original_entry_points
print(json.dumps([zipped, raised, kept is original,
                  kept.__code__ == original.__code__, md.entry_points is epload.entry_points]))
'''
    proc = run_py(tmp_path, code, env={'EPLOAD_DEBUG': '1'})
    zipped, raised, same_object, same_code, patched = json.loads(proc.stdout.strip().splitlines()[-1])
    assert zipped == ['z', 'a'] and raised[0] == raised[1] is not None and same_code and patched
    assert same_object == (order == 'importlib_first')
    assert 'RecursionError' not in proc.stderr


def test_debug_switch_reports_delegation(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'bad', entry_points=b'[g1]\nno equals\n')
    proc = run_py(tmp_path, f'''
import sys
sys.path[:0] = [{str(s)!r}]
import epload
try:
    epload.entry_points(group="g1")
except Exception as e:
    print(type(e).__name__)
''', env={'EPLOAD_DEBUG': '1'})
    assert 'epload: using importlib.metadata: error:' in proc.stderr
    assert 'bad-1.0.dist-info' in proc.stderr


def test_epload_answers_itself_unless_it_must_delegate(tmp_path):
    # Guards the parity tests above: they must compare epload's own answer.
    from epload import _entry_points as internals
    good, bad = tmp_path / 'good', tmp_path / 'bad'
    make_dist(good, 'one', entry_points={'g1': ['a = m:f']})
    make_dist(bad, 'two', entry_points=b'[g1]\nbroken\n')
    with search_path([good]):
        assert internals._query(('g1',)) is not None
    with search_path([good, bad]):
        assert internals._query(('g1',)) is None


# ---- every crafted tree of the differential test, through the Python API ------------

def _difftree_cases():
    import difftrees
    return difftrees.CASES


@pytest.mark.parametrize('name', sorted(_difftree_cases()))
def test_difftree_case_matches_importlib(tmp_path, monkeypatch, name):
    root = tmp_path / 'tree'
    root.mkdir()
    case = _difftree_cases()[name](root)
    if case.skip:
        pytest.skip(case.skip)
    if case.cwd:
        monkeypatch.chdir(case.cwd)

    def light(fn, **params):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            try:
                result = fn(**params)
            except Exception as e:  # noqa: BLE001
                return ('raise', type(e).__name__, str(e))
            eps = [ep for members in dict.values(result) for ep in members] \
                if isinstance(result, dict) else list(result)
            rows = [(ep.name, ep.value, ep.group) for ep in eps]
            if case.compare_dist:
                rows = [r + (ep.dist.name, ep.dist.version) for r, ep in zip(rows, eps)]
            return ('ok', type(result).__name__, rows)

    with search_path(case.paths):
        ours, theirs = light(epload.entry_points), light(im.entry_points)
        assert ours == theirs
        # Every group: from Python 3.12 on, the call above is importlib's own
        # answer, and only selections by group are epload's.
        for group in sorted({row[2] for row in ours[2]} if ours[0] == 'ok' else ()):
            assert light(epload.entry_points, group=group) == light(im.entry_points, group=group)


def test_cache_switches_and_debug_report(tmp_path):
    s = tmp_path / 's'
    make_dist(s, 'one', entry_points={'g1': ['a = m:f']})
    # importlib.metadata imported before sys.path loses the standard library:
    # on Python 3.12+ a selection-less entry_points() is importlib's answer.
    code = f'''
import sys
import importlib.metadata
import epload
sys.path[:] = [{str(s)!r}]
print([e.value for e in epload.entry_points(group="g1")])
'''
    cache = tmp_path / 'cache'
    proc = run_py(tmp_path, code, env={'EPLOAD_NO_CACHE': '1', 'EPLOAD_DEBUG': '1'})
    assert proc.stdout.strip() == "['m:f']" and 'epload: index uncached' in proc.stderr
    assert not cache.exists() or not any(cache.iterdir())
    first = run_py(tmp_path, code, env={'EPLOAD_DEBUG': '1'})
    second = run_py(tmp_path, code, env={'EPLOAD_DEBUG': '1'})
    assert first.stdout == second.stdout == proc.stdout
    assert 'epload: index rebuilt' in first.stderr and 'epload: index hit' in second.stderr
    assert any(p.name.startswith('index-') for p in cache.iterdir())
    # A change: the index is refreshed, and EPLOAD_DEBUG says what was
    # reused and what was read again.
    time.sleep(0.05)  # past the scan's clock tick: its stamps are not racy
    make_dist(s, 'later', entry_points={'g1': ['later = m:later']})
    third = run_py(tmp_path, code, env={'EPLOAD_DEBUG': '1'})
    assert sorted(eval(third.stdout)) == ['m:f', 'm:later'], third.stderr  # in directory order
    assert 'epload: index refreshed: 1 of 1 path entry listed again, 1 of 2 distributions read' in third.stderr, \
        third.stderr


@pytest.mark.parametrize('odd', [b'/bytes/entry', 'nul\0inside', pytest.param(None, id='pathlike')])
def test_odd_sys_path_entries_are_answered_like_importlib(tmp_path, odd):
    s = tmp_path / 's'
    make_dist(s, 'one', entry_points={'g1': ['a = m:f']})
    if odd is None:
        import pathlib
        odd = pathlib.Path(s)
    saved = sys.path[:]
    sys.path[:] = [odd, str(s)]
    try:
        ours = outcome(epload.entry_points, group='g1')
        theirs = outcome(im.entry_points, group='g1')
    finally:
        sys.path[:] = saved
    assert ours == theirs


def test_undecodable_directory_names(tmp_path):
    # Paths are bytes: a site directory whose name is not UTF-8 reaches
    # sys.path surrogate-escaped, and every message quoting it must survive.
    root = os.fsencode(str(tmp_path)) + b'/site\xff'
    site = os.fsdecode(root)
    make_dist(site, 'good', entry_points={'g1': ['a = m:f']})
    assert assert_same([site], group='g1')[0] == 'ok'
    make_dist(site, 'bad', entry_points=b'[g1]\nno equals\n')
    for params in ({'group': 'g1'}, {}):
        assert assert_same([site], **params)[0] == 'raise'


def test_concurrent_calls_agree(tmp_path):
    import threading
    s = tmp_path / 's'
    for i in range(20):
        make_dist(s, f'd{i}', entry_points={'g1': [f'e{i} = m{i}:f'], f'g{i % 3}': ['x = y']})
    expected = None
    with search_path([s]):
        expected = [(ep.name, ep.value, ep.group) for ep in im.entry_points(group='g1')]
        results, barrier = [], threading.Barrier(8)

        def call():
            barrier.wait()
            for _ in range(20):
                results.append([(ep.name, ep.value, ep.group) for ep in epload.entry_points(group='g1')])
        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 160 and all(r == expected for r in results)


@pytest.mark.parametrize('seed', range(int(os.environ.get('EPLOAD_RANDOM_TREES', '30'))))
def test_generated_tree_matches_importlib_for_every_selection(tmp_path, seed):
    # The trees of test_differential_random.py (every parsing and discovery
    # rule mixed, some with a file importlib raises on), through the Python
    # API: results, order, dist name and version, and exceptions.
    import random
    import test_differential_random as gen
    paths = gen.build_paths(random.Random(seed), tmp_path)
    selections = [{}, {'name': 'dup'}, {'value': 'mod:obj'}, {'module': 'mod'}, {'attr': 'obj'},
                  {'extras': ['x']}, {'group': 'g', 'name': 'a'}]
    selections += [{'group': g} for g in gen.GROUPS]
    for params in selections:
        assert_same(paths, **params)


# ---- an unusable EPLOAD_INDEX is said once per process ----------------------------

@pytest.mark.parametrize('kind', ['missing', 'corrupt', 'foreign'])
def test_unusable_shipped_index_is_said_once_and_work_goes_on(tmp_path, kind):
    s = tmp_path / 's'
    make_dist(s, 'one', entry_points={'g1': ['a = m:f'], 'g2': ['b = m:g']})
    shipped = tmp_path / 'index.json'
    if kind == 'corrupt':
        shipped.write_text('{"format": "not an index"}\n')
    elif kind == 'foreign':
        shipped.write_text('{}\n')
        os.chmod(shipped, 0o666)  # writable by anyone: never trusted
    # importlib.metadata imported before sys.path loses the standard library:
    # on Python 3.12+ a selection-less entry_points() is importlib's answer.
    code = f'''
import sys
import importlib.metadata
import epload
sys.path[:] = [{str(s)!r}]
print([e.value for e in epload.entry_points(group="g1")])
print([e.value for e in epload.entry_points(group="g2")])
print(len(epload.entry_points()))
'''
    proc = run_py(tmp_path, code, env={'EPLOAD_INDEX': str(shipped)})
    assert proc.stdout.split('\n')[:3] == ["['m:f']", "['m:g']", '2']
    assert proc.stderr.count('epload: warning: shipped index') == 1, proc.stderr
    assert str(shipped) in proc.stderr and 'EPLOAD_INDEX' in proc.stderr, proc.stderr

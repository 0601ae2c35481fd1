"""The learned-device store's JSON reader (python/src/store.cpp) against
Python's own json module as the oracle, on thousands of generated documents
and their mutations (flipped, inserted and deleted bytes, truncations).

The reader promises RFC 8259 JSON and nothing else: for every input it must
return exactly what ``json.loads`` returns, or None where ``json.loads``
fails or accepts more than RFC 8259 (NaN/Infinity, lone surrogates), and
where nesting is deeper than the reader's limit.  Deterministic (fixed seeds).
"""

import json
import math
import os
import random

import pytest

from pyfixtures import PACKAGE_DIR

MAX_DEPTH = 32  # store.cpp: k_max_depth (a value deeper than this is refused)


@pytest.fixture(scope='module')
def read_store():
    import sys
    if PACKAGE_DIR not in sys.path:
        sys.path.insert(0, PACKAGE_DIR)
    from epload import _entry_points
    return _entry_points._native_module().read_store


def _depth(v, d=0):
    if isinstance(v, dict):
        return max([d] + [_depth(x, d + 1) for x in v.values()])
    if isinstance(v, list):
        return max([d] + [_depth(x, d + 1) for x in v])
    return d


def _has_lone_surrogate(v):
    if isinstance(v, str):
        return any(0xD800 <= ord(c) < 0xE000 for c in v)
    if isinstance(v, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_has_lone_surrogate(x) for x in v)
    return False


def _reject(_):
    raise ValueError('not RFC 8259')


def oracle(data):
    """What the reader must return for the bytes ``data``."""
    try:
        text = data.decode('utf-8')
        v = json.loads(text, parse_constant=_reject)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if _has_lone_surrogate(v) or _depth(v) > MAX_DEPTH:
        return None
    return v


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


ALPHABET = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\x00', '\x1f', '\x7f', 'é', '\u2028',
            '\ud7ff', '\ue000', '\uffff', '\U0001F600', '\U0010FFFF', '0', ':', ',', '{', '[']


def gen_value(rng, depth):
    roll = rng.random()
    if depth > 3 and roll < 0.6 or roll < 0.3:
        kind = rng.choice(['int', 'float', 'str', 'str', 'true', 'false', 'null', 'bigint'])
        if kind == 'int':
            return rng.choice([0, -0, 1, -1, 7, 2**31, -2**53, 2**63, 10**18])
        if kind == 'bigint':
            return rng.randrange(10**60)
        if kind == 'float':
            return rng.choice([0.0, -0.0, 0.5, -2.5e-3, 1e300, 5e-324, 1.7976931348623157e308, 123.456])
        if kind == 'str':
            return ''.join(rng.choice(ALPHABET) for _ in range(rng.randrange(8)))
        return {'true': True, 'false': False, 'null': None}[kind]
    if rng.random() < 0.5:
        return [gen_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {''.join(rng.choice(ALPHABET) for _ in range(rng.randrange(6))): gen_value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def gen_document(rng):
    v = gen_value(rng, 0)
    text = json.dumps(v, ensure_ascii=rng.random() < 0.5,
                      separators=rng.choice([(',', ':'), (', ', ': '), (' ,\n', ' :\t')]))
    if rng.random() < 0.2:
        text = rng.choice([' ', '\n', '\r\n', '\t']) + text + rng.choice(['', ' ', '\n'])
    return text.encode('utf-8', 'surrogatepass')


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[pos:pos] = rng.choice([b'"', b'\\', b'\\u', b'\\ud83d', b'\\udc00', b'0', b'01',
                                        b'-', b'.', b'e', b'E+', b'1e', b',', b':', b'}', b']',
                                        b'{', b'[', b'NaN', b'Infinity', b'tru', b'nul', b'\xff',
                                        b'\xc3', b'\xed\xa0\x80', b'\x00', b' '])
        elif op == 2 and data:
            del data[pos:pos + rng.randrange(1, 4)]
        elif op == 3:
            del data[pos:]
        else:
            data[pos:pos] = data[:rng.randrange(len(data) + 1)]
    return bytes(data)


def check(read_store, tmp_path, cases):
    path = tmp_path / 'store.json'
    for data in cases:
        path.write_bytes(data)
        os.chmod(path, 0o600)
        got, want = read_store(str(path)), oracle(data)
        assert same(got, want), f'{data!r}: reader {got!r}, json {want!r}'


@pytest.mark.parametrize('seed', range(4))
def test_generated_documents_and_mutations_match_json(read_store, tmp_path, seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(400):
        doc = gen_document(rng)
        cases.append(doc)
        cases.extend(mutate(rng, doc) for _ in range(3))
    check(read_store, tmp_path, cases)


def test_numbers_strings_and_nesting_at_the_edges(read_store, tmp_path):
    cases = [b'0', b'-0', b'01', b'-01', b'00', b'1.', b'.5', b'+1', b'1e5', b'1E-5', b'1e+5', b'-',
             b'1.5e', b'0.0', b'-0.0', b'1' * 5000, b'9' * 4300, b'1e400', b'-1e400', b'2.5E-400',
             b'"\\u0000"', b'"\\ud83d\\ude00"', b'"\\ude00\\ud83d"', b'"\\uD83D\\uDE00"',
             b'"\\ud83d"', b'"\\ud83dx"', b'"\\u12"', b'"\\x41"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"',
             b'"\xc0\x80"', b'"\x7f"', b'"\x1f"', b'true', b'trUe', b'null ', b' \t\r\nnull', b'\x0bnull',
             b'{"a":1,"a":2}', b'{"a" 1}', b'{1:2}', b'[1 2]', b'[,]', b'{,}', b'[]]', b'',
             b'[' * MAX_DEPTH + b']' * MAX_DEPTH, b'[' * (MAX_DEPTH + 1) + b']' * (MAX_DEPTH + 1),
             b'[' * MAX_DEPTH + b'1' + b']' * MAX_DEPTH, b'[' * (MAX_DEPTH + 1) + b'1' + b']' * (MAX_DEPTH + 1),
             b'{"a":' * MAX_DEPTH + b'{}' + b'}' * MAX_DEPTH]
    check(read_store, tmp_path, cases)


# ---- match_store: the autoload's discovery loop straight from the file ------
#
# _native.match_store(path, rows, dists) must give what the dict reader gives
# followed by the discovery loop written out below in Python (the loop the
# autoload ran over read_store()'s dict before): on store-shaped documents
# with matching, stale, malformed and repeated entries, and on their
# mutations.

@pytest.fixture(scope='module')
def native():
    import sys
    if PACKAGE_DIR not in sys.path:
        sys.path.insert(0, PACKAGE_DIR)
    from epload import _entry_points
    return _entry_points._native_module()


def reference_match(data, rows, dists):
    """(header, matched) from read_store()'s value, by the rules of
    match_store's docstring (python/src/store.hpp)."""
    if data is None:
        return None
    if type(data) is not dict:
        return (None, None)
    header = {k: v for k, v in data.items() if k != 'backends'}
    backends = data.get('backends')
    if type(backends) is not dict:
        return (header, None)
    known, device_map, unknown, at_start, restat = [None] * len(rows), {}, [], [], []
    for i, (name, value, _group, pos) in enumerate(rows):
        path, stamp = dists[pos][2], dists[pos][3]
        if type(stamp) is not str or not stamp:
            restat.append(i)
            continue
        entry = backends.get(f'{name}\x1f{value}\x1f{path}')
        if (type(entry) is list and entry and all(type(x) is str for x in entry)
                and entry[0] == stamp):
            devices = known[i] = tuple(entry[1:])
            if not devices:
                at_start.append(i)  # a hook
            for d in devices:
                device_map.setdefault(d, []).append(i)
        else:
            unknown.append(i)
            at_start.append(i)
    return (header, (known, device_map, unknown, at_start, restat))


def gen_rows(rng):
    words = ['npu', 'dev\x1f1', 'é', 'a b', '\U0001F600', 'x' * 40, '']
    dists = tuple((f'd{k}', '1.0', rng.choice(['/site/d', '/s\u00e9/d\x1f', '/p']) + str(k),
                   rng.choice([f'{k}:1:2:3:4:5', f'{k}:9', '', None]))
                  for k in range(4))
    rows = [(rng.choice(words) + str(i), rng.choice(words), 'torch.backends', rng.randrange(len(dists)))
            for i in range(rng.randrange(9))]
    return rows, dists


def gen_store(rng, rows, dists):
    """A store document as text: members and entries in random order, keys
    sometimes repeated, entries right, stale, empty, hooks or malformed."""
    def dump(v):
        return json.dumps(v, ensure_ascii=rng.random() < 0.5)

    entries = []
    for name, value, _g, pos in rows:
        if rng.random() < 0.2:
            continue
        key = f'{name}\x1f{value}\x1f{dists[pos][2]}'
        stamp = dists[pos][3] or 'none'
        devices = [rng.choice(['npu', 'dev0', 'é', 'npu']) for _ in range(rng.randrange(3))]
        entry = rng.choice([[stamp, *devices], [stamp, *devices], ['stale', *devices], [], [stamp, 1],
                            'npu', None, {'a': [stamp]}, [stamp, ['npu']]])
        entries.append((key, entry))
        if rng.random() < 0.15:
            entries.append((key, rng.choice([[stamp], ['other'], 5])))  # repeated key: last wins
    entries += [(''.join(rng.choice(ALPHABET) for _ in range(5)), gen_value(rng, 2))
                for _ in range(rng.randrange(3))]  # entries no row asks for
    rng.shuffle(entries)
    backends = '{' + ','.join(f'{dump(k)}:{dump(v)}' for k, v in entries) + '}'
    members = [('format', rng.choice(['epload-devices'] * 4 + ['other'])),
               ('version', rng.choice([1, 1, 1, 1.0, True, 2, '1'])),
               ('group', 'torch.backends'), ('host', 'torch')]
    members = [(k, dump(v)) for k, v in members if rng.random() < 0.95]
    members.append(('backends', rng.choice([backends] * 6 + ['[]', '5', 'null'])))
    if rng.random() < 0.1:
        members.append(('backends', rng.choice([backends, '{}', '"x"'])))  # the last one counts
    members += [(''.join(rng.choice(ALPHABET) for _ in range(4)), dump(gen_value(rng, 1)))
                for _ in range(rng.randrange(2))]
    rng.shuffle(members)
    text = '{' + ','.join(f'{dump(k)}:{v}' for k, v in members) + '}'
    if rng.random() < 0.05:
        text = rng.choice(['[' + text + ']', '"store"', '7'])
    return text.encode('utf-8', 'surrogatepass')


@pytest.mark.parametrize('seed', range(4))
def test_match_store_equals_the_dict_reader_and_the_python_loop(native, tmp_path, seed):
    rng = random.Random(1000 + seed)
    path = tmp_path / 'devices.json'
    for _ in range(300):
        rows, dists = gen_rows(rng)
        doc = gen_store(rng, rows, dists)
        for data in [doc] + [mutate(rng, doc) for _ in range(2)]:
            path.write_bytes(data)
            os.chmod(path, 0o600)
            got = native.match_store(str(path), rows, dists)
            want = reference_match(native.read_store(str(path)), rows, dists)
            if want is None or got is None:
                assert got is None and want is None, f'{data!r}: {got!r} against {want!r}'
                continue
            assert same(got[0], want[0]), f'{data!r}: header {got[0]!r} against {want[0]!r}'
            if want[1] is None or got[1] is None:
                assert got[1] is None and want[1] is None, f'{data!r}: {got[1]!r} against {want[1]!r}'
                continue
            gk, gm, gu, ga, gr = got[1]
            wk, wm, wu, wa, wr = want[1]
            assert (gk, list(gm.items()), gu, ga, gr) == (wk, list(wm.items()), wu, wa, wr), \
                f'{data!r} with rows {rows!r}'


def test_match_store_refuses_what_read_store_refuses(native, tmp_path):
    rows = [('n', 'v', 'g', 0)]
    dists = (('d', '1', '/p', 's'),)
    assert native.match_store(str(tmp_path / 'absent.json'), rows, dists) is None
    path = tmp_path / 'devices.json'
    path.write_bytes(b'{"backends": {"n\\u001fv\\u001f/p": ["s", "npu"]}}')
    os.chmod(path, 0o600)
    header, matched = native.match_store(str(path), rows, dists)
    assert header == {} and matched[0] == [('npu',)] and matched[1] == {'npu': [0]}
    os.chmod(path, 0o620)  # writable by the group: not trusted
    assert native.match_store(str(path), rows, dists) is None
    os.chmod(path, 0o600)
    path.write_bytes(b'{"backends": {"n\\u001fv\\u001f/p": ["s", "np\xffu"]}}')  # not UTF-8
    assert native.match_store(str(path), rows, dists) is None
    with pytest.raises(TypeError):
        native.match_store(str(path), tuple(rows), dists)

"""What importing and using epload pulls into a fresh interpreter: `import
epload` must not import importlib.metadata, email, zipfile or pathlib (nor re,
json, threading, or its own native module), and neither must a query answered
from the index.  Checked through sys.modules, never through timings.
"""


from pyfixtures import make_dist, run_json

HEAVY = ('importlib.metadata', 'email', 'zipfile', 'pathlib', 're', 'json', 'threading',
         'epload._native', 'epload._autoload')

PROBE = '''
import sys
before = set(sys.modules)
{code}
new = set(sys.modules) - before
import json  # only now: it imports re
print(json.dumps(sorted(m for m in {heavy!r} if m in new)))
'''


def test_import_epload_imports_nothing_heavy(tmp_path):
    assert run_json(tmp_path, PROBE.format(code='import epload', heavy=HEAVY)) == []


def site_query(tmp_path):
    """Code that queries epload for a one-distribution site made here."""
    site = tmp_path / 'site'
    make_dist(site, 'one', entry_points={'g1': ['a = m:f [x]']})
    return f'''
sys.path.insert(0, {str(site)!r})
import epload
eps = epload.entry_points(group="g1")
'''


def test_a_query_answered_from_the_index_imports_nothing_heavy(tmp_path):
    # Without a selection: 3.11 answers from the index; 3.12+ asks importlib.
    code = site_query(tmp_path) + '''
eps = epload.entry_points() if sys.version_info < (3, 12) else epload.entry_points(group="g1")
ep = eps.select(group="g1")["a"]
ep.name, ep.value, ep.group, repr(ep), hash(ep)
'''
    heavy = tuple(m for m in HEAVY if m != 'epload._native')
    assert run_json(tmp_path, PROBE.format(code=code, heavy=heavy)) == []


def test_dist_and_extras_import_importlib_only_when_asked(tmp_path):
    site = tmp_path / 'site'
    make_dist(site, 'one', '3.1', {'g1': ['a = m:f [x]']})
    code = f'''
sys.path.insert(0, {str(site)!r})
import epload
ep = epload.entry_points(group="g1")["a"]
assert ep.extras == ["x"] and ep.dist.version == "3.1"
'''
    assert run_json(tmp_path, PROBE.format(code=code, heavy=('importlib.metadata', 're'))) == [
        'importlib.metadata', 're']


def test_with_dash_s_a_query_does_not_import_warnings(tmp_path):
    # A normal interpreter imports warnings at start-up; one started with -S
    # does not, and epload must not make it pay for it on the success path.
    code = site_query(tmp_path)
    assert run_json(tmp_path, PROBE.format(code=code, heavy=('warnings',)), args=('-S',)) == []


def test_first_queries_in_many_threads_leave_the_dlopen_flags_alone(tmp_path):
    # The flags are the whole interpreter's: another thread importing an
    # extension must never see them changed (a broken extension loaded
    # lazily dies at its first call instead of failing its import).  Many
    # threads make their first query at once, threads switching as often as
    # the interpreter allows, in fresh processes.
    site = tmp_path / 'site'
    make_dist(site, 'one', entry_points={'g1': ['a = m:f']})
    code = f'''
import json, sys, threading
sys.path.insert(0, {str(site)!r})
sys.setswitchinterval(1e-6)
before = sys.getdlopenflags()
import epload
start = threading.Barrier(16)
seen = set()
def first_query():
    start.wait()
    seen.add(sys.getdlopenflags())
    assert [e.name for e in epload.entry_points(group="g1")] == ["a"]
    seen.add(sys.getdlopenflags())
threads = [threading.Thread(target=first_query) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
maps = open('/proc/self/maps').read()
print(json.dumps([sorted(seen) == [before] and sys.getdlopenflags() == before, '_native.' in maps]))
'''
    outcomes = [run_json(tmp_path, code) for _ in range(24)]
    assert outcomes == [[True, True]] * len(outcomes)

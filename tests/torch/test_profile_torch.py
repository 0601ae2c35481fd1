"""`epload profile -- <venv python> -c 'import torch; torch.ones(2).to("foo")'`
on a real torch process: the report shows the host import (`import torch`),
discovery, each backend's load marked at start (the hook) or on first use
(foo), and with --eager-estimate what stock autoload would have loaded more
(bar); the Chrome trace it writes is valid trace-event JSON (what Perfetto
opens), with foo's load outside `import torch` and the hook's inside it.
Real torch, real processes; no timing is asserted."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))
EPLOAD = BUILD / 'epload'
CODE = 'import torch; torch.ones(2).to("foo")'

sys.path.insert(0, str(SOURCE / 'tests' / 'cli'))
from test_profile import validate_trace  # noqa: E402  (one definition of a valid trace)


@pytest.fixture(scope='module')
def profiled(torch_python, tmp_path_factory):
    from conftest import Env
    root = tmp_path_factory.mktemp('profile')
    env = Env(torch_python, root, ['foo', 'hook', 'bar'])
    cwd = root / 'cwd'  # '' on sys.path: a directory nothing writes into
    cwd.mkdir()

    def profile(*args):
        return subprocess.run([str(EPLOAD), 'profile', *map(str, args), '--', torch_python, '-c',
                               CODE], capture_output=True, text=True, env=env.environ(),
                              cwd=cwd, timeout=900)
    # The first run learns the devices (every backend loads at start).
    first = profile('--json')
    assert first.returncode == 0, first.stderr
    trace = root / 'trace.json'
    report = profile('--json', '--eager-estimate', '--trace', trace)
    assert report.returncode == 0, report.stderr
    text = profile()
    assert text.returncode == 0, text.stderr
    return json.loads(first.stdout), json.loads(report.stdout), trace, text.stdout


def test_report_shows_import_discovery_and_each_load(profiled):
    first, r, _, _ = profiled
    assert sorted((b['backend'], b['when']) for b in first['loaded']) == [
        ('bar', 'at start'), ('foo', 'at start'), ('hook', 'at start')]
    assert [p['name'] for p in r['processes']] == ['python']
    assert r['exit_status'] == 0 and r['problems'] == []
    # foo is loaded by its first use, the hook at the end of import torch;
    # bar is never loaded.
    assert sorted((b['backend'], b['kind'], b['when']) for b in r['loaded']) == [
        ('foo', 'python', 'first use'), ('hook', 'python', 'at start')]
    steps = r['timeline']
    host = [s for s in steps if s['name'] == 'import torch']
    assert len(host) == 1 and host[0]['depth'] == 0 and host[0]['phase'] == 'total'
    discovery = [s for s in steps if s['note'].startswith('discovery')]
    assert discovery and all(s['depth'] == 1 for s in discovery)
    # torch's own body is a step of its own, before epload's discovery: the
    # rest of `import torch` is what epload added.
    body = [s for s in steps if s['name'] == 'body of torch']
    assert len(body) == 1 and body[0]['depth'] == 1 and body[0]['phase'] == 'total'
    assert body[0]['start_us'] >= host[0]['start_us']
    assert body[0]['start_us'] + body[0]['dur_us'] <= min(s['start_us'] for s in discovery)
    assert 0 < body[0]['dur_us'] < host[0]['dur_us']
    loads = {s['name']: s for s in steps if s['phase'] == 'load'}
    # The hook loads inside import torch, in the Loader's start.
    start = [s for s in steps if s['name'] == 'loader start']
    assert len(start) == 1 and start[0]['depth'] == 1
    assert loads['hook']['depth'] == 2 and loads['hook']['note'] == 'at start'
    assert loads['foo']['depth'] == 0 and loads['foo']['note'] == 'first use'
    end = host[0]['start_us'] + host[0]['dur_us']
    assert loads['foo']['start_us'] >= end


def test_eager_estimate_is_what_stock_autoload_adds(profiled):
    _, r, _, _ = profiled
    est = r['eager_estimate']
    assert est is not None and est['backends'] == 1 and est['extra_us'] > 0
    assert 'EPLOAD_MODE=eager' in est['method']


def test_trace_is_valid_and_nests_the_start_loads_in_import_torch(profiled):
    _, _, trace, _ = profiled
    events, data = validate_trace(trace)
    host = [e for e in events if e['name'] == 'import torch' and e['cat'] == 'total']
    assert len(host) == 1
    h = host[0]
    inside = {e['name']: h['ts'] <= e['ts'] and e['ts'] + e['dur'] <= h['ts'] + h['dur'] + 0.002
              for e in events if e['cat'] == 'load'}
    assert inside == {'hook': True, 'foo': False}
    names = [e for e in data['traceEvents'] if e['ph'] == 'M' and e['name'] == 'process_name']
    assert names and names[0]['args']['name'] == 'python'


def test_text_report(profiled):
    _, _, _, text = profiled
    assert 'timeline (ms from the trace\'s first span, every process on one axis' in text
    lines = text.splitlines()
    assert any(ln.split()[2:4] == ['import', 'torch'] for ln in lines), text
    assert any('load foo' in ln and ln.rstrip().endswith('first use') for ln in lines), text
    assert any('load hook' in ln and ln.rstrip().endswith('at start') for ln in lines), text
    assert any('discovery (' in ln for ln in lines), text


def test_imports_are_in_the_report_and_each_backend_load_names_its_own(profiled):
    _, r, trace, text = profiled
    imp = r['imports']
    by = {t['module']: t for t in imp['by_self']}
    assert by['torch']['count'] == 1 and by['torch']['cumulative_us'] > 0
    assert imp['by_cumulative'][0]['module'] == 'torch'
    # The import span of torch holds epload's "import torch" span (the hook
    # runs inside the import system's load of torch).
    events, _ = validate_trace(trace)
    (span,) = [e for e in events if e['cat'] == 'import' and e['name'] == 'torch']
    (host,) = [e for e in events if e['cat'] == 'total' and e['name'] == 'import torch']
    assert span['ts'] <= host['ts'] and host['ts'] + host['dur'] <= span['ts'] + span['dur'] + 0.002
    loaded = {b['backend']: b for b in r['loaded']}
    assert loaded['foo']['imports'] is not None
    assert 'torch_foo' in {d['module'] for d in loaded['foo']['imports']['direct']}
    assert 'slowest imports by cumulative time' in text and "imports each backend's load caused" in text


def test_plain_import_torch_imports_cover_its_time_and_say_what_to_set(torch_python, tmp_path):
    """Without EPLOAD_AUTOLOAD_HOSTS: the imports are still profiled, and the
    report says what to set for epload's own spans."""
    from conftest import Env
    env = Env(torch_python, tmp_path, []).environ(EPLOAD_AUTOLOAD_HOSTS=None)
    p = subprocess.run([str(EPLOAD), 'profile', '--json', '--', torch_python, '-c', 'import torch'],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    imp = r['imports']
    assert imp['by_cumulative'][0]['module'] == 'torch'
    assert imp['modules'] > 300
    # The outermost imports cover the process's traced time, which `import
    # torch` fills (ratio of two figures of one run, not a timing).
    (proc,) = imp['processes']
    assert proc['us'] >= 0.9 * r['traced_us'], (proc, r['traced_us'])
    torch_self = sum(t['self_us'] for t in imp['by_self'] if t['module'].split('.')[0] == 'torch')
    assert torch_self > 0
    text = subprocess.run([str(EPLOAD), 'profile', '--', torch_python, '-c', 'import torch'],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900).stdout
    assert 'set EPLOAD_AUTOLOAD_HOSTS=torch' in text
    assert 'slowest imports by self time' in text

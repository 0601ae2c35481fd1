"""`python -m epload.bench`, the benchmark installed with epload, run as a user
runs it: by the python of a venv holding torch 2.13 and epload as pip
installed them (the torch venv, layered under a venv of the test's own by a
.pth line, so that a backend can be installed into it alone).  Tiny sizes and
few rounds: no timing is asserted, only what is written, verified, judged
and left behind.  The gate's verdicts come from a real backend that declares
no device and burns CPU when imported: it loads at `import torch` even under
epload lazy."""

import json
import os
import pathlib
import struct
import subprocess
import sys

import pytest

from user_venv import install_backend, make_venv, site_packages

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))
TINY = ['--import-cost', '1', '--quick', '--rounds', '2', '--runs', '2', '--warmup', '0']
# The fewest rounds the wall-time gate judges from, and little else.
JUDGED = ['--rounds', '7', '--runs', '2', '--warmup', '0']

# A backend without declared devices whose import burns MS of CPU.
SLOW_HOOK = '''import os, time
_end = time.process_time() + {ms} / 1000
while time.process_time() < _end:
    pass


def _autoload():
    os.environ["SLOW_HOOK_RAN"] = "1"
'''


def bench(python, *args, cwd=None, **more):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON'))}
    env.update({k: str(v) for k, v in more.items()})
    return subprocess.run([str(python), '-m', 'epload.bench', *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=1500)


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob('*'))


def has_matplotlib(python):
    return subprocess.run([str(python), '-c', 'import matplotlib'],
                          capture_output=True).returncode == 0


@pytest.fixture(scope='module')
def venv(torch_python, tmp_path_factory):
    return make_venv(torch_python, tmp_path_factory.mktemp('user') / 'venv')


@pytest.fixture(scope='module')
def met(venv, tmp_path_factory):
    """A run at 2 and 4 generated backends, gate met; the venv and a fresh
    HOME before and after."""
    out = tmp_path_factory.mktemp('met')
    home = tmp_path_factory.mktemp('home')
    before = tree(venv.parent.parent)
    proc = bench(venv, '--synthetic', '2,4', '--distributions', 12, *TINY, '--fail-over', 50,
                 '--json', out / 'b.json', '--markdown', out / 'b.md', '--plot', out / 'b.png',
                 HOME=home)
    after = tree(venv.parent.parent)
    return out, proc, (before, after), tree(home)


def test_a_met_gate_exits_0_and_writes_the_outputs(met, venv):
    out, proc, _, _ = met
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / 'b.json').read_text())
    assert data['torch']['torch'].startswith('2.13.0') and data['torch']['host'] == 'torch'
    assert data['config']['python'] == str(venv)
    assert [r['backends'] for r in data['sizes']] == [2, 4]
    assert [r['distributions'] for r in data['sizes']] == [12, 12]
    for row in data['sizes']:
        assert set(row['stats']) == {'floor', 'stock', 'epload-eager', 'epload-lazy',
                                     'epload-lazy-paths', 'lazy-first-use', 'by-hand'}
        ver = row['verified']
        assert ver['stock']['modules'] == row['backends'] == ver['epload-eager']['modules']
        assert ver['epload-lazy']['modules'] == 0 and ver['floor']['modules'] == 0
        # The first use imports the middle generated backend, and it alone.
        assert ver['lazy-first-use']['modules'] == 1 and ver['lazy-first-use']['provider']
        assert row['device'] == f'dev{row["backends"] // 2:04d}'
        assert row['in_process']['total']['median_ms'] > 0
    # --quick reports the wall-time gate, never judges it.
    assert [t['met'] for t in data['targets']] == [None, None]
    assert all(t['unjudged'] == 'reported, not judged (--quick)' for t in data['targets'])
    assert data['first_use']['use'] == 'torch.dev0002'
    md = (out / 'b.md').read_text()
    assert md in proc.stdout
    # One sentence per target opens the report, before any table.
    opening = md.split('\n|', 1)[0].splitlines()
    assert [ln[:40] for ln in opening if ln.startswith('- ')] == [
        '- **reported, not judged (--quick)**: ep'] * 2
    assert 'epload lazy adds ≤ 50% to `import torch` (whole process)' in opening[2]


def test_the_plot_or_a_clear_word_on_matplotlib(met, venv):
    out, proc, _, _ = met
    if has_matplotlib(venv):
        data = (out / 'b.png').read_bytes()
        assert data[:8] == b'\x89PNG\r\n\x1a\n'
        assert struct.unpack('>II', data[16:24])[0] > 400
    else:
        assert 'pip install matplotlib' in proc.stderr and not (out / 'b.png').exists()


def test_nothing_is_left_behind(met):
    # Not in the environment measured, nor in HOME (its cache directory
    # included: epload's caches of the run lived in its temporary directory).
    _, proc, (before, after), home = met
    assert proc.returncode == 0, proc.stderr
    assert after == before
    assert home == []


def test_a_slow_backend_that_needs_the_users_environment_fails_the_gate(torch_python, met,
                                                                         tmp_path):
    # The backend is found through PYTHONPATH alone and needs a vendor
    # toolkit's variable (as CANN's set_env.sh sets them): measured in the
    # user's environment, its 400 ms at `import torch` fail both gates.
    python = make_venv(torch_python, tmp_path / 'venv')
    vendor = tmp_path / 'vendor'
    vendor.mkdir()
    install_backend(python, 'slow_hook', 'import os\nos.environ["VENDOR_TOOLKIT_HOME"]\n'
                    + SLOW_HOOK.format(ms=400))
    for f in site_packages(tmp_path / 'venv').glob('slow_hook*'):
        f.rename(vendor / f.name)
    summary = tmp_path / 'summary.md'
    summary.write_text('# written by an earlier step\n')
    proc = bench(python, '--synthetic', '0', *JUDGED, '--fail-over', 5,
                 '--baseline', met[0] / 'b.json', '--fail-regression', 50,
                 '--json', tmp_path / 'b.json', '--markdown', summary,
                 PYTHONPATH=vendor, VENDOR_TOOLKIT_HOME=vendor, GITHUB_STEP_SUMMARY=summary)
    assert proc.returncode == 1, proc.stderr
    data = json.loads((tmp_path / 'b.json').read_text())
    assert [b[0] for b in data['torch']['backends']] == ['slow_hook']
    assert {'PYTHONPATH', 'VENDOR_TOOLKIT_HOME'} <= set(data['environment']['inherited'])
    assert data['environment']['mode'] == 'inherited'
    [wall] = [t for t in data['targets'] if t['rule'] == 'whole']
    assert wall['met'] is False  # the whole interval over 5% of the floor
    assert data['sizes'][0]['in_process']['total']['median_ms'] > 300  # the hook's load
    md = summary.read_text()
    assert md.startswith('# written by an earlier step\n### Real PyTorch')  # appended
    assert 'installed backends: slow_hook' in md and '`VENDOR_TOOLKIT_HOME`' in md
    assert 'NOT MET: epload lazy adds ≤ 5% to `import torch`' in proc.stderr


def test_counts_are_the_same_across_warm_runs_and_the_count_gate_works_both_ways(
        torch_python, tmp_path):
    python = make_venv(torch_python, tmp_path / 'venv')
    install_backend(python, 'hook_mods', 'def _autoload():\n    pass\n')
    site = site_packages(tmp_path / 'venv')
    first, second, grown = (tmp_path / f'{n}.json' for n in ('first', 'second', 'grown'))
    proc = bench(python, *TINY, '--json', first)
    assert proc.returncode == 0, proc.stderr
    proc = bench(python, *TINY, '--baseline', first, '--fail-count-regression', '--json', second)
    assert proc.returncode == 0, proc.stderr
    a, b = (json.loads(p.read_text())['sizes'][0]['stats'] for p in (first, second))
    assert set(a) == set(b)
    for v in a:
        for k in ('modules', 'shared_objects', 'stat_calls', 'open_calls'):
            assert a[v]['counts'][k] == b[v]['counts'][k], (v, k)
        assert a[v]['counts']['module_names'] == b[v]['counts']['module_names']
    assert a['floor']['counts']['shared_objects'] > 10  # torch's libraries among them
    [t] = json.loads(second.read_text())['targets']
    assert t['met'] is True and t['measured'].startswith('none grew')
    # The same backend, importing five more modules in no time: caught, named.
    for k in range(5):
        (site / f'hook_extra_{k}.py').write_text('')
    (site / 'hook_mods.py').write_text(
        ''.join(f'import hook_extra_{k}\n' for k in range(5)) + 'def _autoload():\n    pass\n')
    proc = bench(python, *TINY, '--baseline', first, '--fail-count-regression', '--json', grown)
    assert proc.returncode == 1, proc.stderr
    [t] = json.loads(grown.read_text())['targets']
    assert t['met'] is False
    assert t['grew']['epload-lazy'][0].startswith('modules ')
    assert all(f'hook_extra_{k}' in t['grew']['epload-lazy'][0] for k in range(5))
    assert 'NOT MET: no count of epload lazy above first.json' in proc.stderr
    # Another backend set: the counts do not compare (2, before measuring).
    install_backend(python, 'hook_other', 'def _autoload():\n    pass\n')
    proc = bench(python, *TINY, '--baseline', first, '--fail-count-regression')
    assert proc.returncode == 2
    assert 'came from another backend set' in proc.stderr.strip().splitlines()[-1]
    # A baseline without counts: 2, a usage error.
    old = json.loads(first.read_text())
    for v in old['sizes'][0]['stats'].values():
        v.pop('counts')
    first.write_text(json.dumps(old))
    proc = bench(python, '--baseline', first, '--fail-count-regression')
    assert proc.returncode == 2 and 'no counts in it' in proc.stderr


def test_a_baseline_without_the_size_is_not_judged(venv, met, tmp_path):
    proc = bench(venv, '--synthetic', '0', *TINY, '--baseline', met[0] / 'b.json',
                 '--fail-regression', 50, '--json', tmp_path / 'b.json')
    assert proc.returncode == 1, proc.stderr
    [t] = json.loads((tmp_path / 'b.json').read_text())['targets']
    assert t['met'] is None
    assert t['unjudged'] == 'not judged: the baseline has no run at 0 generated backends'


@pytest.mark.parametrize('args,message', [
    (['--fail-regression', '5'], '--baseline OLD.json and --fail-regression PCT go together'),
    (['--synthetic', 'a'], '--synthetic must be comma-separated integers'),
    (['--synthetic', '10', '--distributions', '5'], '--distributions 5 is fewer than'),
    (['--json', '/no/such/dir/b.json'], '--json /no/such/dir/b.json: no directory /no/such/dir'),
    (['--markdown', '/etc/hostname/b.md'], '--markdown /etc/hostname/b.md: no directory'),
    (['--plot', '/tmp'], '--plot /tmp: a file name is needed'),
    (['--fail-over', '-1'], '--fail-over must be >= 0'),
    (['--host', 'no such'], "--host 'no such' is not a module name"),
    (['--host', 'json'], '--host json needs --group GROUP'),
    (['--baseline', '/no/such.json', '--fail-regression', '1'],
     '--baseline /no/such.json: No such file or directory'),
])
def test_usage_errors(venv, args, message):
    proc = bench(venv, *args)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]  # after the usage lines: one message
    assert last.startswith('epload bench: error: ') and message in last, proc.stderr


def test_an_unwritable_output_is_a_usage_error(venv):
    # sysfs takes no new file, whoever asks.
    proc = bench(venv, '--markdown', '/sys/b.md')
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        '--markdown /sys/b.md: not writable (Permission denied)')


def test_a_json_that_is_not_a_bench_result_is_refused(venv, tmp_path):
    (tmp_path / 'x.json').write_text('{"ratios": {}}')
    proc = bench(venv, '--baseline', tmp_path / 'x.json', '--fail-regression', 1)
    assert proc.returncode == 2
    assert 'not the --json of `epload bench`' in proc.stderr


def test_what_cannot_be_measured_says_why_in_one_line(torch_python, tmp_path):
    python = make_venv(torch_python, tmp_path / 'venv')
    site = site_packages(tmp_path / 'venv')
    (site / 'broken_host.py').write_text('raise ImportError("the host is broken")\n')
    install_backend(python, 'raising', 'def _autoload():\n    raise ValueError("boom")\n')
    cases = [
        (['--host', 'no_such_host', '--group', 'g'], f'{python} has no module no_such_host'),
        (['--host', 'broken_host', '--group', 'g'],
         '`import broken_host` fails in ' + str(python) + ': ImportError: the host is broken'),
        ([], 'Failed to load the backend extension: raising.'),
    ]
    for args, message in cases:
        proc = bench(python, *args, '--json', tmp_path / 'b.json')
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith('epload bench: ') and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / 'b.json').exists()


def test_an_environment_without_torch_is_one_line(torch_python, tmp_path):
    python = make_venv(torch_python, tmp_path / 'venv', layered=False)
    proc = bench(python, '--json', tmp_path / 'b.json')
    assert proc.returncode == 2
    assert proc.stderr.strip() == f'epload bench: {python} has no module torch (pip install torch)'


def test_another_host_and_group(torch_python, tmp_path):
    # A host that loads nothing itself, modelled as the help says: its floor
    # is its import, its stock autoload PyTorch's loop over the group.
    python = make_venv(torch_python, tmp_path / 'venv')
    (site_packages(tmp_path / 'venv') / 'plughost.py').write_text(
        '"""A host of plugins."""\n__version__ = "1.0"\n')
    proc = bench(python, '--host', 'plughost', '--group', 'plughost.plugins', '--synthetic', 3,
                 '--distributions', 8, *TINY, '--fail-over', 100, '--json', tmp_path / 'b.json')
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / 'b.json').read_text())
    assert data['torch']['host'] == 'plughost' and data['torch']['group'] == 'plughost.plugins'
    [row] = data['sizes']
    assert row['environments']['floor'] == {}
    assert row['environments']['epload-lazy'] == {
        'EPLOAD_AUTOLOAD_HOSTS': 'plughost=plughost.plugins', 'EPLOAD_MODE': 'lazy'}
    ver = row['verified']
    assert ver['stock']['modules'] == 3 and ver['stock']['devices'] == 3
    assert ver['epload-lazy']['modules'] == 0 and ver['lazy-first-use']['modules'] == 1
    assert data['first_use']['use'] == 'plughost.dev0001'
    assert 'import torch' not in ' '.join(row['commands']['floor'])


def test_the_gate_power_campaign_runs_at_a_tiny_size(torch_python, tmp_path):
    # scripts/gate_power.py, one round at a tiny size: --quick reports, so the
    # wall-time gate catches nothing; the count gate still does.
    proc = subprocess.run(
        [sys.executable, str(SOURCE / 'scripts' / 'gate_power.py'), '--runs', '1',
         '--python', str(torch_python), '--bench-args=--quick --rounds 2 --runs 2 --warmup 0',
         '--json', str(tmp_path / 'power.json')],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert '| false alarms, unchanged environment (either gate) | 1 | 0 of 1 |' in proc.stdout
    assert '| 1 | 0 of 1 (0 judged) |' in proc.stdout
    assert 'caught by `--fail-count-regression` | 1 | 1 of 1 |' in proc.stdout
    runs = json.loads((tmp_path / 'power.json').read_text())['runs']
    assert [len(v) for v in runs.values()] == [1, 1, 1]

"""Runs a scenario's processes: stock autoload (the oracle), stock without
the failing backend, and the hook per declaration form, first and later run,
and eager.  Each process is a fresh interpreter of the torch venv running
probe.py; its records, exit status and other output are kept as data for
compare.py.  The runs of many scenarios go through one small pool; a hook's
first and later runs are one job (they share the cache directory, in that
order)."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

from . import scenarios as sc

HERE = pathlib.Path(__file__).resolve().parent
TORCH_TESTS = HERE.parent
FIXTURES = TORCH_TESTS / 'parity_backends'
COMMON = [TORCH_TESTS / 'backends' / 'common', FIXTURES / 'common']
PROBE = (HERE / 'probe.py').read_text()
# Only against a hang (reported as one, never waited out silently).
PROCESS_LIMIT = 120


def declaration(device, form):
    """The ``[epload.devices]`` section of a backend's entry_points.txt."""
    kind = sc.KINDS[device]
    if form == 'none' or kind is None:
        return ''
    value = sc.entry_point(device) + (f' [{kind}]' if form == 'kind' else '')
    return f'\n[epload.devices]\n{device} = {value}\n'


def make_site(root, backends, form):
    """Copies each backend into its own directory (a real site directory: the
    package and its dist-info), its declaration written in; returns them."""
    dirs = []
    for b in backends:
        target = pathlib.Path(root) / f'site-{form}' / b
        if not target.exists():
            shutil.copytree(FIXTURES / b, target)
            eps = target / f'{sc.entry_point(b)}-0.1.dist-info' / 'entry_points.txt'
            eps.write_text(eps.read_text() + declaration(b, form))
        dirs.append(target)
    return dirs


def environ(dirs, cache, log, hook, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON'))}
    env.update(PYTHONPATH=os.pathsep.join(map(str, COMMON + list(dirs))), PYTHONDONTWRITEBYTECODE='1',
               EPLOAD_CACHE_DIR=str(cache), EPLOAD_TORCH_FIXTURE_LOG=str(log),
               TORCH_DEVICE_BACKEND_AUTOLOAD='1')
    if hook:
        env['EPLOAD_AUTOLOAD_HOSTS'] = 'torch'
    env.update(extra)
    return env


def run_child(python, work, dirs, steps, scenario, cache, hook, extra=None):
    """One fresh process: its records, exit status (negative: the signal),
    stdout lines that are not records, and stderr."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / 'events'
    extra = dict(scenario.env, **(extra or {}))
    if scenario.hold:
        hold = work / 'hold'
        hold.mkdir()
        extra['PARITY_HOLD'] = str(hold)
    spec = {'backends': [sc.entry_point(b) for b in scenario.backends], 'devices': scenario.devices,
            'steps': steps}
    proc = subprocess.Popen([python, '-c', PROBE, json.dumps(spec)], cwd=work, text=True,
                            env=environ(dirs, cache, log, hook, extra), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=PROCESS_LIMIT)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        hung = True
    lines = out.splitlines()
    records = [json.loads(line[2:]) for line in lines if line.startswith('@@')]
    logged = log.read_text().splitlines() if log.exists() else []
    logged = [' '.join(line.split()[:2]) for line in logged]
    # Events after the last record: the process ended inside the next step.
    tail = logged[sum(len(r.get('events', ())) for r in records):]
    return {'records': records, 'tail': tail,
            'stdout': [line for line in lines if not line.startswith('@@')],
            'returncode': proc.returncode, 'hung': hung, 'stderr': err, 'dir': str(work)}


def jobs(scenario, root):
    """(key, function) per job; a job returns {run name: result}.  Names:
    ``stock-first``, ``stock-later`` (when the later steps differ),
    ``stock-without-<run>``, ``hook-<form>`` -> ``hook-<form>-first`` and
    ``-later``, ``eager``."""
    root = pathlib.Path(root) / scenario.name
    runs = ('first',) if scenario.later_steps is None else ('first', 'later')
    out = []
    for run in runs:
        def stock(python, run=run):
            dirs = make_site(root / f'site-stock-{run}', scenario.backends, 'none')
            return {f'stock-{run}': run_child(python, root / f'stock-{run}', dirs, scenario.run_steps(run),
                                              scenario, root / f'stock-{run}' / 'cache', hook=False)}
        out.append(stock)
        if scenario.fails:
            def without(python, run=run):
                rest = [b for b in scenario.backends if b != scenario.fails]
                dirs = make_site(root / f'site-without-{run}', rest, 'none')
                return {f'stock-without-{run}': run_child(python, root / f'without-{run}', dirs,
                                                          scenario.run_steps(run), scenario,
                                                          root / f'without-{run}' / 'cache', hook=False)}
            out.append(without)
    for form in scenario.declarations:
        def hook(python, form=form):
            dirs = make_site(root / 'site-hook', scenario.backends, form)
            cache = root / f'hook-{form}-cache'
            return {f'hook-{form}-{run}': run_child(python, root / f'hook-{form}-{run}', dirs,
                                                    scenario.run_steps(run), scenario, cache, hook=True)
                    for run in ('first', 'later')}
        out.append(hook)
    if scenario.eager:
        def eager(python):
            dirs = make_site(root / 'site-eager', scenario.backends, 'none')
            return {'eager': run_child(python, root / 'eager', dirs, scenario.steps, scenario,
                                       root / 'eager' / 'cache', hook=True, extra={'EPLOAD_MODE': 'eager'})}
        out.append(eager)
    return out


def run_all(python, names, root, workers=4):
    """{scenario name: {run name: result}} for the named scenarios, their
    processes run ``workers`` at a time."""
    todo = [(name, job) for name in names for job in jobs(sc.BY_NAME[name], root)]
    results = {name: {} for name in names}
    with ThreadPoolExecutor(workers) as pool:
        for (name, _), got in zip(todo, pool.map(lambda t: t[1](python), todo)):
            results[name].update(got)
    for name, got in results.items():  # for a look afterwards: compare.py reads these too
        (pathlib.Path(root) / name / 'results.json').write_text(json.dumps(got, indent=1))
    return results

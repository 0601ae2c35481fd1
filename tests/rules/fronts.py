"""The two fronts asked the same question: what does one start of a host do
under this environment (tests/rules/cases.json)?  Each returns
{"mode", "at_start", "disabled", "devices", "warnings"} (devices and
disabled only when the mode is not off): the mode, the backends loaded at
start and the warnings as each front decides them before anything loads;
the devices and disabled backends as known once the start is over (for the
CLI: `epload devices` after that Python start, which stored what it
learned in the one learned-devices store)."""

import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'py'))

from pyfixtures import BUILD_DIR, HOST_STYLES, PYTHON, env_for, make_backend, make_host, run_json  # noqa: E402

CASES = json.loads((HERE / 'cases.json').read_text())['cases']
EPLOAD = os.path.join(BUILD_DIR, 'epload')

# A host whose import ends with epload.autoload for the case's group (mode
# from the environment, as the .pth hook runs it), then reports.
HOST = '''
import epload
epload.autoload(group=GROUP, host=__name__)
'''

PROBE = '''
import json, sys, warnings
before = set(sys.modules)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fakehost
at_start = sorted(m for m in set(sys.modules) - before if m.startswith("be_"))
import epload._autoload as A
s = A._session_order[0]
out = {"mode": s.mode, "at_start": at_start,
       "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}
if s.mode != "off":
    out["disabled"] = [b.name for b in s.backends if b.state == "disabled"]
    devices = {}
    for b in s.backends:
        if b.state != "disabled" and b.devices:
            for name, how, kind in zip(b.devices, [b.source] * len(b.devices), b.kinds):
                devices.setdefault(name, [b.name, how, kind])
    out["devices"] = devices
print(json.dumps(out))
'''


class Setup:
    """A case's tree: backends in one site directory each, a host, a cache."""

    def __init__(self, tmp_path, case):
        self.tmp_path = tmp_path
        self.case = case
        self.group = case.get('group', 'torch.backends')
        host_dir = tmp_path / 'hostdir'
        HOST_STYLES['rules'] = HOST.replace('GROUP', repr(self.group))
        make_host(host_dir, 'rules')
        self.pythonpath = [host_dir]
        for k, b in enumerate(case['backends']):
            site = tmp_path / f'site{k}'
            make_backend(site, b['name'], devices=b.get('devices'), group=b.get('group', 'torch.backends'),
                         declare=b.get('declare', False), dist=b.get('dist'))
            self.pythonpath.append(site)
        for env in case.get('learn', []):
            self.python(env)

    def python(self, env=None):
        """The Python front: one start of the host."""
        return run_json(self.tmp_path, PROBE, pythonpath=self.pythonpath, env=env)

    def cli(self, env=None):
        """The CLI on the same sys.path (asked of the same interpreter) and cache."""
        run_env = env_for(self.tmp_path, pythonpath=self.pythonpath, extra=env)
        common = ['--python', PYTHON, '--group', self.group, '--json']
        warnings = []

        def run(*args):
            proc = subprocess.run([EPLOAD, *args, *common], env=run_env, cwd=str(self.tmp_path),
                                  capture_output=True, text=True, timeout=120)
            for line in proc.stderr.splitlines():
                if line.startswith('epload: warning: ') and line[17:] not in warnings:
                    warnings.append(line[17:])
            return proc

        load = run('load', 'nosuchdevice')
        mode = json.loads(load.stdout)['mode']
        listing = run('devices')
        assert listing.returncode == 0, listing.stderr
        backends = json.loads(listing.stdout)['backends']
        if mode == 'off':
            at_start = []
        elif mode == 'eager':
            at_start = [b['backend'] for b in backends if b['state'] != 'disabled']
        else:  # lazy: hooks and backends whose devices are unknown (the core's start rule)
            at_start = [b['backend'] for b in backends
                        if b['state'] != 'disabled' and (b['hook'] or not b['devices_known'])]
        out = {'mode': mode, 'at_start': sorted(at_start), 'warnings': warnings}
        if mode != 'off':
            # What the host's start learns (the CLI cannot run Python
            # backends) is what a Python start stores: the CLI lists it then.
            self.python(env)
            listing = run('devices')
            got = json.loads(listing.stdout)
            out['disabled'] = [b['backend'] for b in got['backends'] if b['state'] == 'disabled']
            out['devices'] = {d['device']: [d['backend'], d['how'], d['kind']] for d in got['devices']}
        return out

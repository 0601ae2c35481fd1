"""Compares one run under the hook with its oracle, field by field: stock
autoload's run of the same steps, or, where a backend makes stock's ``import
torch`` fail, stock's failure for that backend and stock without it for the
rest.  A difference is excused only by an entry of allowed.py; ``compare``
returns (differences, excused), each a list of readable lines."""

import json

from . import allowed
from . import scenarios as sc

LOAD_FREE_EVENTS = ('lazy_init_call', 'init')  # a device's own use, not its backend's load


def _show(x):
    return json.dumps(x, sort_keys=True)


def _records(result):
    return {r['step']: r for r in result['records']} if result else {}


# The triggers that need a backend of each kind, in stock as under the hook:
# torch.device() parses a registered name and needs nothing of the backend;
# a device string of an attribute device is no device type for torch.
NEEDS = {'privateuse1': ('attr', 'hasattr', 'getattr', 'gdm', 'to', 'empty'),
         'attr': ('attr', 'hasattr', 'getattr')}
OP_OF = {'fork': 'to', 'daemon': 'attr'}  # what probe.py's thread does


def first_use(scenario, backend, steps):
    """The index of the first step that needs the backend (-1 for a hook,
    whose use is import torch; None if no step needs it)."""
    kind = sc.KINDS[backend]
    if kind is None:
        return -1
    for i, (op, dev) in enumerate(steps):
        if op == 'threads':
            used = [d for o, d in dev if o in NEEDS[kind]]
        elif op == 'accel':  # is_available() and device_count() ask torch.<PrivateUse1 name>
            used = [b for b in scenario.backends if sc.KINDS[b] == 'privateuse1']
        else:
            used = [dev] if OP_OF.get(op, op) in NEEDS[kind] else []
        if backend in used:
            return i
    return None


class _Comparison:
    def __init__(self, scenario, results, name):
        self.scenario = scenario
        self.run = 'later' if name.endswith('-later') and scenario.later_steps else 'first'
        self.steps = scenario.run_steps(self.run)
        self.hook = results[name]
        self.stock = results[f'stock-{self.run}']
        self.without = results.get(f'stock-without-{self.run}')
        self.H, self.S = _records(self.hook), _records(self.stock)
        self.diffs, self.excused = [], []
        f = scenario.fails
        s_import = self.S.get('import')
        self.stock_failed = bool(f) and (s_import is None or 'raised' in s_import['out'])
        self.O = _records(self.without) if self.stock_failed else self.S
        self.declared = '-kind-' in name  # the backends declare their devices' kinds

    def diff(self, what):
        self.diffs.append(what)

    def excuse(self, key, what):
        allowed.excuse(key, self.excused, what)

    def hook_loaded(self, backend, upto):
        """Whether the hook's run imported ``backend`` at or before record ``upto``."""
        for key, r in self.H.items():
            pos = -1 if key == 'import' else len(self.steps) if key == 'end' else key
            if pos <= upto and f'{backend} import' in r.get('events', []):
                return True
        return False

    # -- outcomes ------------------------------------------------------------
    def outcome(self, where, o, h, op, dev, pos):
        if o == h:
            return
        if 'raised' in o and 'raised' in h:
            if set(o['isa']) <= set(h['isa']) and set(h['names']) > set(o['names']):
                return self.excuse('names-backend', f'{where}: stock {o["raised"]}, hook {h["raised"]} '
                                   f'naming {h["names"]}')
        f = self.scenario.fails
        registered = (self.stock_failed and sc.KINDS.get(f) == 'privateuse1'
                      and (self.hook_loaded(f, pos) or self.declared))
        if op == 'device' and dev == f and registered and 'raised' in o and h.get('value') == f:
            return self.excuse('privateuse1-stays', f'{where}: torch.device({f!r}) parses')
        if op == 'accel' and 'value' in o and 'value' in h:
            for k in o['value']:
                ov, hv = o['value'][k], h['value'].get(k)
                if ov == hv:
                    continue
                # torch.accelerator's queries of a registered name without
                # its module raise torch's own error (get_device_module).
                if registered and ((k == 'pu1' and hv == f)
                                   or (k == 'current' and str(hv.get('value', '')).split(':')[0] == f)
                                   or (k in ('is_available', 'device_count') and 'raised' in hv
                                       and hv['isa'] == ['RuntimeError'] and not hv['names'])):
                    self.excuse('privateuse1-stays', f'{where}.{k}: {_show(hv)}')
                    continue
                self.diff(f'{where}.{k}: stock {_show(ov)} | hook {_show(hv)}')
            return
        if op == 'threads' and 'value' in o and 'value' in h and len(o['value']) == len(h['value']):
            for i, (ov, hv) in enumerate(zip(o['value'], h['value'])):
                self.outcome(f'{where} thread {i}', ov, hv, dev[i][0], dev[i][1], pos)
            return
        if op == 'fork' and 'value' in o and 'value' in h:
            ov, hv = o['value'], h['value']
            for k in ('child_status', 'thread'):
                if ov[k] != hv[k]:
                    self.diff(f'{where}.{k}: stock {_show(ov[k])} | hook {_show(hv[k])}')
            oc, hc = ov['child'], hv['child']
            if oc != hc:
                ep = sc.entry_point(dev)
                if isinstance(hc, dict) and ep in hc.get('names', ()):
                    self.excuse('fork-during-load', f'{where}: the child raised {hc["raised"]} naming {ep}')
                else:
                    self.diff(f'{where}.child: stock {_show(oc)} | hook {_show(hc)} (required: stock\'s '
                              'answer or an error naming the backend, never a hang)')
            return
        self.diff(f'{where}: stock {_show(o)} | hook {_show(h)}')

    # -- events --------------------------------------------------------------
    def positions(self, records, result):
        out, last = {}, -2
        for key, r in records.items():
            pos = -1 if key == 'import' else len(self.steps) if key == 'end' else key
            last = max(last, pos)
            for e in r.get('events', []):
                out.setdefault(e, []).append(pos)
        for e in result['tail']:  # the process ended inside the step after its last record
            out.setdefault(e, []).append(last + 1)
        return out

    def events(self):
        oracle = self.positions(self.O, self.without if self.stock_failed else self.stock)
        if self.stock_failed:
            f = self.scenario.fails
            for e, at in self.positions(self.S, self.stock).items():
                if e.split()[0] == f:
                    oracle.setdefault(e, []).extend(at)
        hook = self.positions(self.H, self.hook)
        for e in sorted(set(oracle) | set(hook)):
            op, hp = sorted(oracle.get(e, [])), sorted(hook.get(e, []))
            if op == hp:
                continue
            backend, name = (e.split() + [''])[:2]
            if name == 'lazy_init_call':
                # Not an observable: torch's C++ device_lazy_init calls the
                # device module's _lazy_init until one call has returned, so
                # every thread already inside it calls it too, stock or not,
                # as many as happen to be there (a slow _lazy_init lets all
                # of them in).  What a user sees is the initialisation
                # (`init`), which the module guards, as torch.cuda does: once.
                continue
            fu = first_use(self.scenario, backend, self.steps) if backend in sc.KINDS else -1
            if fu is not None and fu >= 0 and self.steps[fu][0] == 'daemon' and not hp \
                    and f'{backend} import' in hook:
                self.excuse('exit-during-load', f'{e!r} never: the process exited while the load was under way')
                continue
            if name not in LOAD_FREE_EVENTS and backend in sc.KINDS and len(op) >= len(hp) and (
                    (len(op) == len(hp) and all(o <= h and (fu is None or h <= fu) for o, h in zip(op, hp)))
                    or (not hp and fu is None)):
                self.excuse('when', f'{e!r} at {self.where(hp)} instead of {self.where(op)}')
                continue
            self.diff(f'events {e!r}: stock at {self.where(op)} | hook at {self.where(hp)} '
                      f'(first use: {self.where([fu]) if fu is not None else "none"})')

    def where(self, positions):
        n = len(self.steps)
        return '[' + ', '.join('import' if p == -1 else 'end' if p == n else f'step {p} {self.steps[p][0]}'
                               for p in positions) + ']'

    # -- the whole run -------------------------------------------------------
    def compare(self):
        f = self.scenario.fails
        for side, r in (('stock', self.stock), ('hook', self.hook), ('stock-without', self.without)):
            if r and r['hung']:
                self.diff(f'the {side} process hung ({r["dir"]}): killed after its time limit')
        if f and not self.stock_failed:
            self.diff(f'stock imported torch with {sc.entry_point(f)} installed: the scenario expects it to fail')
        if self.hook['returncode'] != self.stock['returncode']:
            self.diff(f'exit status: stock {self.stock["returncode"]} | hook {self.hook["returncode"]}')
        if self.hook['stdout'] != self.stock['stdout']:
            self.diff(f'stdout: stock {self.stock["stdout"]} | hook {self.hook["stdout"]}')
        h_import, s_import = self.H.get('import'), self.S.get('import')
        if h_import is None or 'raised' in h_import['out']:
            # The hook's import torch failed: stock's must have, the same way.
            if h_import is not None and s_import is not None:
                self.outcome('import torch', s_import['out'], h_import['out'], 'import', None, -1)
            elif (h_import is None) != (s_import is None):
                self.diff(f'import torch: stock {_show(s_import and s_import["out"])} | hook '
                          f'{_show(h_import and h_import["out"])}')
            if len(self.H) > 1 or len(self.S) > 1:
                self.diff('records after a failed import torch')
            return
        if self.stock_failed:
            self.excuse('import-survives', f'import torch: stock {_show(s_import and s_import["out"])} | hook ok')
        elif 'raised' in s_import['out']:
            return self.diff(f'import torch: stock {_show(s_import["out"])} | hook ok')
        o_import = self.O.get('import')
        if o_import is None:
            return self.diff('stock without the failing backend did not import torch')
        self.outcome('after import torch', {'value': o_import['state']}, {'value': h_import['state']},
                     'accel', None, -1)
        fu = first_use(self.scenario, f, self.steps) if self.stock_failed else None
        for i, (op, dev) in enumerate(self.steps):
            h, o = self.H.get(i), self.O.get(i)
            where = f'step {i} {op}({dev!r})' if op != 'threads' else f'step {i} threads'
            if i == fu:
                self.first_use_of_failed(where, h, s_import)
                if h is None:
                    break
                continue
            if h is None and o is None:
                break
            if h is None or o is None:
                self.diff(f'{where}: {"hook" if h is None else "stock"} process ended before it')
                break
            self.outcome(where, o['out'], h['out'], op, dev, i)
        self.events()
        h_end, o_end = self.H.get('end'), self.O.get('end')
        if h_end and o_end:
            for d, ov in o_end['exists'].items():
                hv = h_end['exists'].get(d)
                if ov == hv:
                    continue
                if ov and not hv and not self.hook_loaded(d, len(self.steps)):
                    self.excuse('when', f'torch.{d} not there at the end: not imported yet')
                elif ov and not hv and any(op == 'daemon' and dv == d for op, dv in self.steps):
                    self.excuse('exit-during-load', f'torch.{d} not there at the end: its load is under way')
                else:
                    self.diff(f'at the end, {d!r} in vars(torch): stock {ov} | hook {hv}')
        return None

    def first_use_of_failed(self, where, h, s_import):
        f = sc.entry_point(self.scenario.fails)
        if h is None:
            # The hook's process ended here: stock's ended inside import torch
            # (exit statuses are compared above).
            if s_import is None:
                return self.excuse('import-survives', f'{where}: the process ended as stock\'s import did')
            return self.diff(f'{where}: the hook process ended; stock raised {_show(s_import["out"])}')
        if s_import is None:
            return self.diff(f'{where}: stock ended inside import torch | hook {_show(h["out"])}')
        so, ho = s_import['out'], h['out']
        if 'raised' in ho and set(so['isa']) <= set(ho['isa']):
            return self.excuse('import-survives', f'{where}: raised {ho["raised"]} naming {ho["names"]} '
                               f'(stock\'s import raised {so["raised"]})')
        self.diff(f'{where}: the first use of {f} after it failed: stock\'s import raised {_show(so)} | '
                  f'hook {_show(ho)}')


def compare(scenario, results, name):
    c = _Comparison(scenario, results, name)
    c.compare()
    return c.diffs, c.excused

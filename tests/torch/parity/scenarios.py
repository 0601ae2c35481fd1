"""The parity scenarios: which backends are installed (in this order on the
path, which is the entry points' order), what the child does after ``import
torch`` (probe.py's steps), and what differs between the runs.

Every scenario runs under stock autoload (the oracle) and under the hook for
each declaration form (``none``: undeclared; ``old``: ``[epload.devices]
dev = "parity_dev"``; ``kind``: ``dev = "parity_dev [privateuse1]"`` or
``[attr]``), first with an empty cache directory (``first``) and then again
with the same one (``later``); ``eager`` scenarios also run under the hook
with ``EPLOAD_MODE=eager``.  ``fails`` names the backend that makes stock's
``import torch`` fail: stock also runs without it installed, the oracle of
what the other backends do (allowed.py)."""

from dataclasses import dataclass, field

# Each fixture of tests/torch/parity_backends: its device's kind (None: a
# hook, no device).  The entry point is ``parity_<device>``.
KINDS = {'pone': 'privateuse1', 'ptwo': 'privateuse1', 'afoo': 'attr', 'phook': None,
         'fimp': 'privateuse1', 'fpost': 'privateuse1', 'fattr': 'attr', 'kbint': 'attr',
         'sexit': 'attr', 'psig': 'attr', 'pa': 'attr', 'pb': 'attr'}
DECLARATIONS = ('none', 'old', 'kind')
TRIGGERS = ('attr', 'hasattr', 'getattr', 'gdm', 'device', 'to', 'empty')


def entry_point(device):
    return f'parity_{device}'


def devices_of(backend):
    return [] if KINDS[backend] is None else [backend]


@dataclass
class Scenario:
    name: str
    backends: list
    steps: list
    later_steps: list = None  # the second run's steps, when not the first's
    fails: str = None
    eager: bool = False
    env: dict = field(default_factory=dict)
    hold: bool = False  # PARITY_HOLD: a directory of the process's own

    @property
    def devices(self):
        return [d for b in self.backends for d in devices_of(b)]

    @property
    def declarations(self):
        return DECLARATIONS if self.devices else ('none',)

    def run_steps(self, run):
        return self.steps if run == 'first' or self.later_steps is None else self.later_steps


def _all(dev, order=TRIGGERS):
    return [[op, dev] for op in order]


SCENARIOS = [
    # Backend kinds, each trigger first once.
    Scenario('pu1_attr_first', ['pone'], _all('pone') + [['accel', None]], eager=True),
    Scenario('pu1_to_first', ['pone'], _all('pone', ('to', 'empty', 'device', 'attr')) + [['accel', None]]),
    Scenario('pu1_device_first', ['pone'], _all('pone', ('device', 'to', 'attr')) + [['accel', None]]),
    Scenario('pu1_empty_first', ['pone'], _all('pone', ('empty', 'to')) + [['accel', None]]),
    Scenario('pu1_gdm_first', ['pone'], _all('pone', ('gdm', 'hasattr', 'to')) + [['accel', None]]),
    Scenario('pu1_hasattr_first', ['pone'], _all('pone', ('hasattr', 'getattr', 'to')) + [['accel', None]]),
    Scenario('pu1_accel_first', ['pone'], [['accel', None], ['to', 'pone']]),
    Scenario('attr_only', ['afoo'], _all('afoo') + [['accel', None]]),
    Scenario('attr_only_to_first', ['afoo'], _all('afoo', ('to', 'device', 'attr')) + [['accel', None]]),
    Scenario('hook_backend', ['phook'], [['env', None], ['accel', None]]),
    # Failures.
    Scenario('fail_import', ['fimp', 'pone'], _all('fimp', ('attr', 'hasattr', 'getattr', 'gdm', 'device', 'to'))
             + [['to', 'pone'], ['accel', None]], fails='fimp', eager=True),
    Scenario('fail_import_to_first', ['fimp'], _all('fimp', ('to', 'attr')) + [['accel', None]], fails='fimp'),
    Scenario('fail_after_registering_pu1', ['fpost'], _all('fpost', ('attr', 'hasattr', 'device', 'to'))
             + [['accel', None]], fails='fpost', eager=True),
    Scenario('fail_after_registering_attr', ['fattr'], _all('fattr', ('attr', 'hasattr', 'getattr'))
             + [['accel', None]], fails='fattr'),
    Scenario('fail_keyboard_interrupt', ['kbint'], [['attr', 'kbint'], ['accel', None]], fails='kbint', eager=True),
    Scenario('fail_system_exit', ['sexit'], [['attr', 'sexit'], ['accel', None]], fails='sexit', eager=True),
    # Interactions.
    Scenario('probe_each_other_threads', ['pa', 'pb'],
             [['threads', [['attr', 'pa'], ['attr', 'pb']]], ['hasattr', 'pa'], ['hasattr', 'pb']]),
    Scenario('two_privateuse1', ['pone', 'ptwo'], [['to', 'pone'], ['attr', 'pone'], ['attr', 'ptwo'],
                                                   ['to', 'ptwo'], ['accel', None]], fails='ptwo', eager=True),
    Scenario('attr_before_real', ['afoo', 'pone'], [['to', 'pone'], ['attr', 'afoo'], ['accel', None]]),
    # Process shapes.
    Scenario('threads8_to', ['pone'], [['threads', [['to', 'pone']] * 8], ['accel', None]]),
    Scenario('threads8_attr', ['pone'], [['threads', [['attr', 'pone']] * 8], ['accel', None]]),
    Scenario('fork_during_load', ['pone'], [['fork', 'pone'], ['to', 'pone']], hold=True),
    Scenario('exit_during_load_in_daemon', ['pone'], [['daemon', 'pone']],
             later_steps=[['attr', 'pone'], ['to', 'pone'], ['accel', None]], hold=True),
    Scenario('sigint_during_load', ['psig'], [['attr', 'psig']], fails='psig', env={'PARITY_SIGNAL': 'SIGINT'},
             eager=True),
    Scenario('sigterm_during_load', ['psig'], [['attr', 'psig']], fails='psig', env={'PARITY_SIGNAL': 'SIGTERM'},
             eager=True),
]
BY_NAME = {s.name: s for s in SCENARIOS}

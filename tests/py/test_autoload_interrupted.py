"""epload.autoload on a host of its own: a KeyboardInterrupt or SystemExit
raised while a backend loads propagates unchanged in every mode and is no
failure (recorded nowhere, the backend loads at its next use); a backend
that fails after setting its device on the host is never served it.  Stock
PyTorch's loop (host style ``pytorch``) is the oracle for `import host`."""

import json
import os

import pytest

from pyfixtures import make_backend, make_host, run_py, write

# be_int's import does what BE_INT says, one action per import in the
# process (comma-separated; past the list it registers its device).
INTERRUPTING = '''
import os, types
import fakehost, fakehost_events  # the exception is kept where a failed `import fakehost` leaves it
_n = fakehost._init_counts["be_int"] = fakehost._init_counts.get("be_int", 0) + 1
_actions = os.environ.get("BE_INT", "").split(",")
_action = _actions[_n - 1] if _n <= len(_actions) else "ok"
if _action == "keyboard":
    fakehost_events.RAISED = KeyboardInterrupt("be_int: interrupted")
    raise fakehost_events.RAISED
if _action.startswith("exit:"):
    fakehost_events.RAISED = SystemExit(int(_action[5:]))
    raise fakehost_events.RAISED
fakehost._register_device_module("be_intdev", types.ModuleType("be_int.be_intdev"))
if _action == "halfway":
    raise RuntimeError("be_int: its driver library is missing")

def _autoload():
    pass
'''

CAUGHT = '''
import json, sys
def caught(fn):
    try:
        fn()
    except BaseException as e:
        return [type(e).__name__, [str(a) for a in e.args], e is getattr(fakehost_events, "RAISED", None),
                e.__context__ is None]
    return None
import fakehost_events
'''


def env_with(tmp_path, style, declare=True):
    host_dir = tmp_path / 'hostdir'
    make_host(host_dir, style)
    site = tmp_path / 'site'
    make_backend(site, 'be_int', declare=declare)
    write(os.path.join(site, 'be_int', '__init__.py'), INTERRUPTING)
    return [host_dir, site]


def run(tmp_path, path, code, action, check=True):
    return run_py(tmp_path, CAUGHT + code, pythonpath=path, env={'BE_INT': action}, check=check)


@pytest.mark.parametrize('action', ['keyboard', 'exit:3'])
def test_a_base_exception_in_import_host_is_as_stock_in_every_mode(tmp_path, action):
    seen = {}
    for style, declare in (('pytorch', True), ('epload-eager', True), ('epload-lazy', False)):
        path = env_with(tmp_path / style, style, declare)
        proc = run(tmp_path / style, path, 'print(json.dumps(caught(lambda: __import__("fakehost"))))',
                   action)
        seen[style] = json.loads(proc.stdout.strip().splitlines()[-1])
        uncaught = run(tmp_path / style, path, 'import fakehost', action, check=False)
        seen[style + ' exit'] = [uncaught.returncode, uncaught.stderr.strip().splitlines()[-1:]]
    assert seen['pytorch'][0] == ('KeyboardInterrupt' if action == 'keyboard' else 'SystemExit')
    assert seen['pytorch'][2] is True
    for style in ('epload-eager', 'epload-lazy'):
        assert seen[style] == seen['pytorch'], style
        assert seen[style + ' exit'] == seen['pytorch exit'], style


@pytest.mark.parametrize('trigger', ['fakehost.be_intdev', 'hasattr(fakehost, "be_intdev")',
                                     'epload.device("be_intdev")', 'epload.load("be_int")'])
def test_an_interrupted_lookup_propagates_and_the_backend_stays_loadable(tmp_path, trigger):
    path = env_with(tmp_path, 'epload-lazy')
    proc = run(tmp_path, path, f'''
import epload, fakehost
first = caught(lambda: {trigger})
b = [b for b in epload.backends() if b.name == "be_int"][0]
between = [b.state, b.error, repr(b.cause)]
second = fakehost.be_intdev.__name__
print(json.dumps([first, between, second, b.state]))
''', 'keyboard')
    first, between, second, state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first == ['KeyboardInterrupt', ['be_int: interrupted'], True, True]
    assert between == ['unloaded', '', 'None']
    assert second == 'be_int.be_intdev' and state == 'ready'


def test_a_backend_failing_after_it_set_its_device_is_never_served(tmp_path):
    path = env_with(tmp_path, 'epload-lazy')
    proc = run(tmp_path, path, '''
import epload, fakehost
def error(fn):
    try:
        fn()
    except BaseException as e:
        return [type(e).__name__, isinstance(e, RuntimeError), isinstance(e, AttributeError),
                repr(e.__cause__)]
seen = [error(lambda: fakehost.be_intdev) for _ in range(2)]
seen += [error(lambda: epload.device("be_intdev")), error(lambda: epload.load("be_int"))]
print(json.dumps([seen, hasattr(fakehost, "be_intdev"), getattr(fakehost, "be_intdev", None),
                  "be_intdev" in fakehost.__dict__]))
''', 'halfway')
    seen, has, value, in_dict = json.loads(proc.stdout.strip().splitlines()[-1])
    cause = "RuntimeError('be_int: its driver library is missing')"
    assert seen[0] == seen[1] == ['_BackendAttributeError', True, True, cause]
    assert seen[2] == seen[3] == ['BackendError', True, False, cause]
    assert has is False and value is None and in_dict is False

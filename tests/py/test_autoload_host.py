"""autoload(group, host=None) as docs/python.md documents it: lazy mode (the
default) needs a host and says so; eager and off take host=None."""

from pyfixtures import make_backend, make_host, run_json


def test_lazy_needs_a_host_and_says_how_to_give_one_eager_does_not(tmp_path):
    site = tmp_path / 'site'
    make_host(str(site), 'plain')  # what the backend registers on, imported by it
    make_backend(str(site), 'be_a')
    out = run_json(tmp_path, '''
import json, sys, epload
out = {}
try:
    epload.autoload("torch.backends")
except ValueError as e:
    out["lazy"] = str(e)
s = epload.autoload("torch.backends", mode="eager")
out["eager"] = [s.mode, sorted(m for m in sys.modules if m.startswith("be_"))]
print(json.dumps(out))
''', pythonpath=[site], env={'EPLOAD_MODE': ''})
    assert out['lazy'] == ('lazy autoload needs a host module to register devices on: pass host=__name__ from '
                           'the host package (or host=<module>), or mode="eager"')
    assert out['eager'] == ['eager', ['be_a']]

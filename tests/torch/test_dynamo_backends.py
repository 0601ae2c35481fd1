"""EPLOAD_IMPORTLIB=1 in a real torch: the discovery of dynamo backends
(torch/_dynamo/backends/registry.py, group torch_dynamo_backends) goes
through epload and `torch._dynamo.list_backends()` answers the same as
without it, including a backend a fixture distribution declares, which
`torch.compile` then uses."""

import pytest

LIST = '''
import importlib.metadata, torch
names = torch._dynamo.list_backends()
from torch._dynamo.backends import registry
fn = registry.lookup_backend('epload_fixture')
compiled = torch.compile(lambda x: x * 2 + 1, backend='epload_fixture')
out(names=names, fn=fn.__module__ + '.' + fn.__name__,
    y=compiled(torch.ones(2)).tolist(), answered_by=importlib.metadata.entry_points.__module__)
'''


@pytest.mark.parametrize('hosts', [None, 'torch'], ids=['importlib-only', 'with-autoload'])
def test_list_backends_answers_the_same_with_the_switch(make_env, hosts):
    env = make_env('foo', 'dynamo')
    stock = env.run(LIST, EPLOAD_AUTOLOAD_HOSTS=None)
    switched = env.run(LIST, EPLOAD_AUTOLOAD_HOSTS=hosts, EPLOAD_IMPORTLIB='1', EPLOAD_DEBUG='1')
    assert stock['answered_by'] == 'importlib.metadata'
    assert switched['answered_by'] == 'epload._entry_points'
    assert switched['names'] == stock['names']
    assert 'epload_fixture' in stock['names'] and 'inductor' in stock['names']
    for got in (stock, switched):
        assert got['fn'] == 'epload_dynamo_fixture.backend'
        assert got['y'] == [3.0, 3.0]
        assert got['events'].count('dynamo compile') == 1
    # The switched discovery was answered from the index, not handed back.
    assert "epload: index" in switched['stderr'], switched['stderr'][-3000:]
    assert 'using importlib.metadata' not in switched['stderr'], switched['stderr'][-3000:]

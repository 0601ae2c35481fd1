"""epload_dynamo_fixture: a torch.compile backend declared by its
distribution under ``torch_dynamo_backends`` (as vendor backends declare
theirs), found by ``torch._dynamo.list_backends()`` through
``importlib.metadata.entry_points``.  It runs the graph as traced."""

import epload_torch_fixture as _fixture

_fixture.record('dynamo', 'import')


def backend(gm, example_inputs):
    _fixture.record('dynamo', 'compile')
    return gm.forward

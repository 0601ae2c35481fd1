"""What the fixture backends of tests/torch share (not a distribution: the
tests put this directory on the path beside the backends they choose).

``record(backend, event)`` appends ``<backend> <event> <pid>`` to the file
named by ``$EPLOAD_TORCH_FIXTURE_LOG`` (when set) and counts it in
``COUNTS``, so a test sees how many times a backend was imported and
initialised, from the process itself or after it ended.

``setup_privateuse1(name, owner)`` makes a working PrivateUse1 device in
pure Python (torch >= 2.9): the device is renamed ``name``, its tensors are
storage-less tensors of a ``torch.Tensor`` subclass that carries its values
in a CPU tensor, and the kernels that ``torch.ones(2).to(name)``,
``torch.empty``, ``torch.tensor(..., device=name)`` and ``.cpu()`` need are
registered for the PrivateUse1 dispatch key.  The module registered as
``torch.<name>`` has the runtime API torch asks of a device module
(``is_available``, ``device_count``, ``_lazy_init``, ...).
"""

import os
import threading
import time
import types

COUNTS = {}
RAISED = None  # the BaseException a backend raised on request (torch_flaky)
_log_lock = threading.Lock()


def record(backend, event):
    with _log_lock:
        key = (backend, event)
        COUNTS[key] = COUNTS.get(key, 0) + 1
        path = os.environ.get('EPLOAD_TORCH_FIXTURE_LOG')
        if path:
            with open(path, 'a') as f:
                f.write(f'{backend} {event} {os.getpid()}\n')


def device_module(name, owner):
    """The runtime module of device ``name`` (``torch.<name>`` once
    registered); its ``_lazy_init`` initialises once, however many threads
    call it, as torch.cuda's does."""
    mod = types.ModuleType(f'{owner}.runtime')
    lock = threading.Lock()
    state = {'initialized': False}

    def _lazy_init():
        record(name, 'lazy_init_call')
        if state['initialized']:
            return
        with lock:
            if not state['initialized']:
                record(name, 'init')
                state['initialized'] = True

    mod._lazy_init = _lazy_init
    mod.is_initialized = lambda: state['initialized']
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod._is_in_bad_fork = lambda: False
    mod.manual_seed_all = lambda seed: None
    mod.get_rng_state = lambda device=None: None
    mod.set_rng_state = lambda state, device=None: None

    def device(index):
        # Storages need an allocator for the device, which a backend in
        # pure Python cannot register: torch.load(map_location=...) stops
        # here, cleanly, once the backend has been loaded.
        raise NotImplementedError(f'the {name} test device has no storages')

    mod.device = device
    return mod


def _hold_after_registration():
    """``EPLOAD_TEST_HOLD=<dir>``: between the registration of its module and
    its kernels, the backend writes ``<dir>/registered`` and waits until
    ``<dir>/release`` exists (a test holds the loading thread there)."""
    where = os.environ.get('EPLOAD_TEST_HOLD')
    if not where:
        return
    open(os.path.join(where, 'registered'), 'w').close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(where, 'release')):
        if time.monotonic() > deadline:
            raise RuntimeError(f'EPLOAD_TEST_HOLD: {where}/release never appeared')
        time.sleep(0.005)


def setup_privateuse1(name, owner):
    """Registers the PrivateUse1 device ``name`` with its kernels; returns
    its runtime module (now ``torch.<name>``)."""
    import torch
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    mod = device_module(name, owner)
    _setup_privateuseone_for_python_backend(name, backend_module=mod)
    _hold_after_registration()

    class DeviceTensor(torch.Tensor):
        """A tensor on the device: no storage; its values live in ``raw``, a
        CPU tensor."""

        @staticmethod
        def __new__(cls, raw):
            res = torch._C._acc.create_empty_tensor(raw.size(), raw.dtype)
            res.__class__ = cls
            return res

        def __init__(self, raw):
            self.raw = raw

    DeviceTensor.__name__ = DeviceTensor.__qualname__ = f'{name.capitalize()}Tensor'
    mod.Tensor = DeviceTensor

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return DeviceTensor(torch.empty(size, dtype=dtype or torch.get_default_dtype()))

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        return DeviceTensor(torch.empty_strided(size, stride,
                                                dtype=dtype or torch.get_default_dtype()))

    def copy_from(src, dst, non_blocking=False):
        if src.device.type == name:
            src = src.raw
        if dst.device.type == name:
            dst.raw.copy_(src)
        else:
            dst.copy_(src)
        return dst

    def view(t, size):
        return DeviceTensor(t.raw.view(size))

    def detach(t):
        return DeviceTensor(t.raw.detach())

    def fill(t, value):
        t.raw.fill_(value)
        return t

    # torch.library.impl used as a decorator returns None in torch 2.13:
    # registered by call, the functions stay ours.
    for op, fn in (('aten::empty.memory_format', empty), ('aten::empty_strided', empty_strided),
                   ('aten::_copy_from', copy_from), ('aten::view', view),
                   ('aten::detach', detach), ('aten::fill_.Scalar', fill)):
        torch.library.impl(op, 'privateuseone', fn)
    return mod

"""The child of the parity harness: ``python -c <this file> <spec JSON>``.

Imports torch, then runs the spec's steps in order; after each it prints one
record, ``@@`` + JSON: the step, its outcome (a value, or the exception's
type, the built-in classes it is an instance of and the backends its message
names) and the fixture events logged since the previous record.  Only
``Exception`` is caught: a KeyboardInterrupt or SystemExit ends the process
as it would end a user's (its exit status is compared).

Spec: ``{"backends": [entry-point names], "devices": [...], "steps": [[op,
device], ...]}``.  Ops: ``attr hasattr getattr gdm device to empty`` (the
triggers), ``accel`` (PrivateUse1 name, current accelerator, is_available,
device_count), ``env`` (did a hook run), ``threads`` (the first uses of
``device`` -- a list of ``[op, device]`` -- at once, one thread each),
``fork`` (a thread starts the load of ``device``; the main thread forks while
it is under way; the child uses the device), ``daemon`` (a daemon thread
starts the load of ``device``; the process exits while it is under way)."""

import json
import os
import select
import signal
import sys
import threading

SPEC = json.loads(sys.argv[1])
LOG = os.environ['EPLOAD_TORCH_FIXTURE_LOG']
KINDS = (RuntimeError, AttributeError, ImportError, LookupError, ValueError, TypeError,
         NotImplementedError)
CHILD_LIMIT = 60  # below the harness's limit for the whole process
_seen = [0]
PID = os.getpid()  # a forked child's events are its own, not this process's
torch = None


def new_events():
    try:
        with open(LOG) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    got, _seen[0] = lines[_seen[0]:], len(lines)
    return [' '.join(line.split()[:2]) for line in got if line.split()[2:] == [str(PID)]]


def events_of(pid):
    try:
        with open(LOG) as f:
            return [' '.join(line.split()[:2]) for line in f if line.split()[2:] == [str(pid)]]
    except FileNotFoundError:
        return []


def emit(**record):
    print('@@' + json.dumps(record, default=repr), flush=True)


def raised(e):
    return {'raised': f'{type(e).__module__}.{type(e).__qualname__}',
            'isa': [k.__name__ for k in KINDS if isinstance(e, k)],
            'names': sorted(b for b in SPEC['backends'] if b in str(e))}


def outcome(fn):
    try:
        return {'value': fn()}
    except Exception as e:
        return raised(e)


def describe(x):
    return None if x is None else [type(x).__name__, getattr(x, '__name__', None)]


def trigger(op, dev):
    if op == 'attr':
        return describe(getattr(torch, dev))
    if op == 'hasattr':
        return hasattr(torch, dev)
    if op == 'getattr':
        return describe(getattr(torch, dev, None))
    if op == 'gdm':
        return describe(torch.get_device_module(dev))
    if op == 'device':
        return str(torch.device(dev))
    if op == 'to':
        t = torch.ones(2).to(dev)
        return [str(t.device), t.cpu().tolist()]
    if op == 'empty':
        t = torch.empty(2, device=dev)
        return [str(t.device), list(t.shape)]
    if op == 'env':
        return os.environ.get('IS_CUSTOM_DEVICE_BACKEND_IMPORTED')
    raise ValueError(f'probe: unknown op {op!r}')


def accel():
    return {'pu1': torch._C._get_privateuse1_backend_name(),
            'current': outcome(lambda: str(torch.accelerator.current_accelerator())),
            'is_available': outcome(torch.accelerator.is_available),
            'device_count': outcome(torch.accelerator.device_count)}


def threads(uses):
    results = [None] * len(uses)
    barrier = threading.Barrier(len(uses))

    def run(i, op, dev):
        barrier.wait()
        results[i] = outcome(lambda: trigger(op, dev))
    workers = [threading.Thread(target=run, args=(i, op, dev)) for i, (op, dev) in enumerate(uses)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results


def hold_dir():
    return os.environ['PARITY_HOLD']


def started_load(op, dev, daemon):
    """A thread that uses ``dev``; returns once its load is under way (the
    backend wrote ``holding``) or the thread is done (nothing to load)."""
    done = threading.Event()
    box = {}

    def run():
        box['out'] = outcome(lambda: trigger(op, dev))
        done.set()
    t = threading.Thread(target=run, daemon=daemon)
    t.start()
    holding = os.path.join(hold_dir(), 'holding')
    while not done.wait(0.005) and not os.path.exists(holding):
        pass
    return t, done, box, os.path.exists(holding)


def fork(dev):
    t, done, box, holding = started_load('to', dev, daemon=False)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        got = outcome(lambda: trigger('to', dev))
        os.write(write, json.dumps(got).encode())
        os._exit(0)
    os.close(write)
    # Only against a hang (reported as one): the child ends by itself.
    ready, _, _ = select.select([read], [], [], CHILD_LIMIT)
    child = os.read(read, 1 << 16).decode() if ready else None
    if child is None:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(read)
    open(os.path.join(hold_dir(), 'release'), 'w').close()
    t.join()
    return {'child': json.loads(child) if child else 'hung', 'child_status': status,
            'thread': box.get('out'), 'child_events': events_of(pid)}


def daemon(dev):
    _, _, _, holding = started_load('attr', dev, daemon=True)
    return 'exiting'


def main():
    global torch
    try:
        import torch as t
    except Exception as e:
        emit(step='import', out=raised(e), events=new_events())
        return
    torch = t
    emit(step='import', out={'value': None}, events=new_events(),
         state={'pu1': torch._C._get_privateuse1_backend_name(),
                'current': outcome(lambda: str(torch.accelerator.current_accelerator()))})
    for i, (op, dev) in enumerate(SPEC['steps']):
        if op == 'accel':
            out = {'value': accel()}
        elif op == 'threads':
            out = {'value': threads(dev)}
        elif op == 'fork':
            out = {'value': fork(dev)}
        elif op == 'daemon':
            out = {'value': daemon(dev)}
        else:
            out = outcome(lambda: trigger(op, dev))
        emit(step=i, op=op, dev=dev, out=out, events=new_events())
    emit(step='end', exists={d: d in vars(torch) for d in SPEC['devices']}, events=new_events())


main()

"""Counted work per variant, beside the times: modules imported, shared
objects mapped, stat- and open-family calls, bytes read.  Counts do not
wander with the machine's load as times do, so a gate on them is exact.

How each is taken, in one more run of the variant after the timed rounds
(same environment, same warm caches), with COUNT code run at its end:
  modules         len(sys.modules): every module imported, by anyone
  shared_objects  distinct files mapped with ".so" in their name, from
                  /proc/self/maps: extension modules, the libraries the
                  dynamic loader opened for them (their dependencies too)
  bytes_read      /proc/self/io `rchar`: bytes the process's read-family
                  calls returned, every thread (mapped pages not included)
  stat_calls, open_calls
                  "strace": `strace -f -c` counts the kernel's calls of the
                  stat family (stat, lstat, fstat, newfstatat, statx) and the
                  open family (open, openat, openat2, creat), every thread and
                  child, C and Python alike; used when strace runs here.
                  "python", without strace: Python-level calls only, counted
                  in-process from the start of the command (os/posix stat
                  and lstat wrapped: importlib's and os.path's; the "open" audit event, which imports' reads of
                  .py/.pyc raise too).  It misses C code's calls (the dynamic
                  loader's, a C++ core's, epload's own) and the interpreter's
                  start-up before the command.
What can still vary between identical warm runs: a cache that is rewritten
(an index refreshed because a file changed under it, a .pyc compiled once),
and bytes_read when a file read grows (a log, /proc files of changing size);
the gate compares modules, shared_objects, stat_calls and open_calls.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from .proc import BenchError, capture

MARK = "EPLOAD-BENCH-COUNTS "
GATED = ("modules", "shared_objects", "stat_calls", "open_calls")
STAT_FAMILY = ("stat", "lstat", "fstat", "newfstatat", "fstatat64", "statx", "stat64", "lstat64",
               "fstat64")
OPEN_FAMILY = ("open", "openat", "openat2", "creat")

# Put before the command: Python-level stat and open calls, counted.
PROLOGUE = ("import os as _co, posix as _cp, sys as _cs; _cn = [0, 0]\n"
            "def _cw(f):\n"
            "    def w(*a, **k):\n"
            "        _cn[0] += 1\n"
            "        return f(*a, **k)\n"
            "    return w\n"
            "_cp.stat, _cp.lstat = _cw(_cp.stat), _cw(_cp.lstat)\n"
            "_co.stat, _co.lstat = _cp.stat, _cp.lstat\n"
            "def _ca(event, args):\n"
            "    if event == 'open':\n"
            "        _cn[1] += 1\n"
            "_cs.addaudithook(_ca)\n")
# Put after the command: the counts as one JSON line on stdout.
EPILOGUE = ("\nimport json as _cj, sys as _cs\n"
            "_cm = sorted(_cs.modules)\n"
            "with open('/proc/self/io') as _cf:\n"
            "    _ci = dict(l.split(': ') for l in _cf.read().split('\\n') if ': ' in l)\n"
            "with open('/proc/self/maps') as _cf:\n"
            "    _co = sorted({l.split(None, 5)[5].strip() for l in _cf\n"
            "                  if len(l.split(None, 5)) == 6 and '.so' in l.rsplit('/', 1)[-1]})\n"
            "_cn = globals().get('_cn')\n"
            f"print({MARK!r} + _cj.dumps({{'modules': _cm, 'shared_objects': _co,\n"
            "       'bytes_read': int(_ci.get('rchar', 0)),\n"
            "       'python_calls': _cn}))\n")


def have_strace():
    """True when `strace -f -c` can trace a process here (ptrace may be denied)."""
    if not shutil.which("strace"):
        return False
    proc = subprocess.run(["strace", "-f", "-c", "-U", "calls,name", "-o", os.devnull, "--",
                           "/bin/true"], capture_output=True)
    return proc.returncode == 0


def strace_calls(argv, env, out):
    """(stdout, {syscall: calls}) of one run of argv under `strace -f -c`."""
    proc = capture(["strace", "-f", "-c", "-U", "calls,name", "-o", out, "--", *argv], env)
    with open(out) as f:  # "CALLS NAME" lines (strace >= 5.6), then "CALLS total"
        per = {w[1]: int(w[0]) for w in map(str.split, f) if len(w) == 2 and w[0].isdigit()}
    per.pop("total", None)
    return proc.stdout, per


def count(argv_of, env, tmp, method):
    """The counts of one run: ``argv_of(prologue, epilogue)`` gives its argv."""
    if method == "strace":
        stdout, per = strace_calls(argv_of("", EPILOGUE), env, os.path.join(tmp, "strace-c.txt"))
    else:
        stdout, per = capture(argv_of(PROLOGUE, EPILOGUE), env).stdout, None
    line = next((ln for ln in stdout.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        raise BenchError(f"no counts from {' '.join(argv_of('', ''))[:300]}")
    r = json.loads(line[len(MARK):])
    if per is not None:
        stat, opened = (sum(per.get(k, 0) for k in fam) for fam in (STAT_FAMILY, OPEN_FAMILY))
    else:
        stat, opened = r["python_calls"]
    return {"modules": len(r["modules"]), "shared_objects": len(r["shared_objects"]),
            "stat_calls": stat, "open_calls": opened, "bytes_read": r["bytes_read"],
            "method": method, "module_names": r["modules"], "library_names": r["shared_objects"]}


def grown(old, new):
    """What grew from ``old`` counts to ``new``: [text], naming the modules
    and libraries added."""
    out = []
    for k in GATED:
        if new[k] > old[k]:
            text = f"{k} {old[k]:,} → {new[k]:,} (+{new[k] - old[k]:,})"
            names = {"modules": "module_names", "shared_objects": "library_names"}.get(k)
            if names and names in old and names in new:
                added = sorted(set(new[names]) - set(old[names]))
                if added:
                    shown = ", ".join(added[:12]) + (f", … ({len(added) - 12} more)"
                                                     if len(added) > 12 else "")
                    text += f": {shown}"
            out.append(text)
    return out

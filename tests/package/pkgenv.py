"""Helpers for the packaging tests (package.*): the interpreters on this
machine, fresh virtual environments under the build directory, pip runs.

Interpreters are found, never named by version: the build's ($EPLOAD_PYTHON)
and the `python3` on PATH (a pyenv shim is resolved to the interpreter it
runs), each asked for its own facts.
"""

import fcntl
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = os.environ.get("EPLOAD_PYTHON", "python3")
WORK = BUILD_DIR / "package"  # venvs and pip's build trees, kept between runs

FACTS = r'''
import importlib.machinery, json, platform, sys
print(json.dumps({"executable": sys.executable, "version": list(sys.version_info[:2]),
                  "implementation": sys.implementation.name,
                  "ext_suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
                  "machine": platform.machine()}))
'''


def clean_env(**extra):
    """The environment for a child that must see only what it installs:
    nothing of the build tree (ctest sets PYTHONPATH), byte-code allowed."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "VIRTUAL_ENV")
           and not k.startswith("EPLOAD_")}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")  # pip's build: ninja would take cores + 2
    env.update(extra)
    return env


def facts(python):
    """The interpreter's own facts, or None when it does not run."""
    try:
        proc = subprocess.run([python, "-c", FACTS], capture_output=True, text=True,
                              env=clean_env(), timeout=60)
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    out = json.loads(proc.stdout)
    out["version"] = tuple(out["version"])
    return out


def interpreters():
    """The interpreters to install into: the build's and the python3 on PATH,
    de-duplicated by the file they run, each one that can make a venv."""
    seen, out = set(), []
    for candidate in (PYTHON, shutil.which("python3", path=clean_env().get("PATH"))):
        if not candidate:
            continue
        f = facts(candidate)
        if not f or f["implementation"] != "cpython":
            continue
        real = os.path.realpath(f["executable"])
        if real in seen:
            continue
        seen.add(real)
        out.append(f)
    return out


def other_versions(version):
    """CPython interpreters of another X.Y than `version`, found on PATH and
    under pyenv's versions directory, nearest newer versions first."""
    names = set()
    for d in clean_env().get("PATH", "").split(os.pathsep):
        names.update(p for p in glob.glob(os.path.join(d, "python3.*")) if re.search(r"python3\.\d+$", p))
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    names.update(glob.glob(os.path.join(root, "versions", "*", "bin", "python3")))
    found = {}
    for name in sorted(names):
        f = facts(name)
        if f and f["implementation"] == "cpython" and f["version"] != version:
            found.setdefault(f["version"], f)
    return sorted(found.values(), key=lambda f: (f["version"] < version, abs(f["version"][1] - version[1])))


def slug(f):
    """A directory name for an interpreter: its version and its file."""
    return "py%d%d-" % f["version"] + re.sub(r"[^A-Za-z0-9]+", "_", os.path.realpath(f["executable"])).strip("_")


def project_version():
    """The version, from its one place: project(epload VERSION ...)."""
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    return re.search(r"project\(epload VERSION ([0-9.]+)", text).group(1)


def run(cmd, timeout=1800, check=True, **kw):
    kw.setdefault("env", clean_env())
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\n"
                             f"stderr:\n{proc.stderr[-4000:]}")
    return proc


def pip_install_checkout(python, f):
    """`pip install <checkout>` into the venv of `python` (interpreter `f`).
    scikit-build-core's build tree for this interpreter is under the build
    directory (pip's build environment is new at every install, so the tree
    is cleared and the build is whole: what a user's `pip install` does); a
    lock beside it makes tests that run at once take turns in it (two
    builds in one tree delete each other's objects)."""
    tree = WORK / "skbuild" / f"install-{slug(f)}"
    tree.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{tree}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return run([python, "-m", "pip", "install", f"--config-settings=build-dir={tree}", SOURCE_DIR])


def fresh_venv(f, name):
    """A new virtual environment of interpreter `f` under the build
    directory (an old one of the same name is removed first)."""
    root = WORK / f"{name}-{slug(f)}"
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    run([f["executable"], "-m", "venv", root])
    return root


def tree(root):
    """Every file and directory under root, relative, as a set."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames)
    return out


def source_tree():
    """The checkout's files with their sizes and times, less git's, the
    build trees and generated output: what a build must not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(SOURCE_DIR):
        if dirpath == str(SOURCE_DIR):
            dirnames[:] = [d for d in dirnames if d not in (".git", "out") and not d.startswith("build")]
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            out[os.path.relpath(os.path.join(dirpath, n), SOURCE_DIR)] = (st.st_size, st.st_mtime_ns)
    return out


# ---- the release wheels (scripts/wheels.sh) ----------------------------------
# package.wheels builds them into WHEELS_OUT with its tools and trees under
# WHEELS_WORK; $EPLOAD_WHEELS_DIR names other wheels to test (dist/, say).
WHEELS_OUT = WORK / "dist"
WHEELS_WORK = BUILD_DIR / "wheels"
ELF_POLICY = SOURCE_DIR / "scripts" / "wheels" / "elf_policy.py"


def release_wheels():
    """The release wheels under test (every architecture), sorted by name."""
    where = pathlib.Path(os.environ.get("EPLOAD_WHEELS_DIR") or WHEELS_OUT)
    return sorted(where.glob(f"epload-{project_version()}-cp3*-manylinux*.whl"))


def wheel_arch(wheel):
    """The architecture a release wheel's tag names (x86_64, aarch64)."""
    return re.search(r"_(x86_64|aarch64)\.whl$", wheel.name).group(1)


def skip_unless_it_runs_here(wheel):
    """Installing a wheel needs its architecture: another one's (aarch64 on
    x86-64) is run under emulation by scripts/arm64_check.sh instead."""
    import platform
    import pytest
    if wheel_arch(wheel) != platform.machine():
        pytest.skip(f"{wheel.name} is for {wheel_arch(wheel)}, this machine is {platform.machine()}: "
                    "scripts/arm64_check.sh installs and tests it under emulation")


def wheel_tools():
    """The bin/ of scripts/wheels.sh's tools venv (auditwheel, elf_policy's
    pyelftools)."""
    tools = pathlib.Path(os.environ.get("EPLOAD_WHEELS_WORK") or WHEELS_WORK) / "tools" / "bin"
    assert (tools / "auditwheel").exists(), f"no {tools}/auditwheel: run scripts/wheels.sh first"
    return tools


def wheel_python(wheel):
    """The interpreter a wheel (epload-V-cpXY-...) is for: pyenv's newest
    X.Y, else pythonX.Y on PATH."""
    tag = re.search(r"-cp3(\d+)-", wheel.name).group(1)
    version = f"3.{tag}"
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", version + ".*", "bin", "python" + version)),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/versions/")[1].split("/")[0])])
    exe = found[-1] if found else shutil.which("python" + version, path=clean_env().get("PATH"))
    assert exe, f"no CPython {version} on this machine for {wheel.name}"
    return exe

"""scripts/wheels.sh refuses what it cannot build from, before any download
or build, with a message that says what is missing: an argument that is no
Python interpreter, an architecture it does not build for, a source tree
that is not a git checkout (the sdist is `git archive` of HEAD), a machine
without git.  The building itself is
package.wheels'."""

import os
import pathlib
import shutil
import subprocess
import sys

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
WHEELS_SH = SOURCE_DIR / "scripts" / "wheels.sh"


def copy_of_the_script(tmp_path):
    """A source tree holding only scripts/wheels.sh."""
    src = tmp_path / "src"
    (src / "scripts").mkdir(parents=True)
    shutil.copy(WHEELS_SH, src / "scripts" / "wheels.sh")
    return src


def wheels(src, tmp_path, *args, path=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPLOAD_")}
    env.update(EPLOAD_WHEELS_OUT=str(tmp_path / "dist"), EPLOAD_WHEELS_WORK=str(tmp_path / "work"), **extra)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["bash", str(src / "scripts" / "wheels.sh"), *map(str, args)], capture_output=True,
                          text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)


def test_an_argument_that_is_no_interpreter_is_refused(tmp_path):
    src = copy_of_the_script(tmp_path)
    proc = wheels(src, tmp_path, "/bin/false")
    assert proc.returncode == 1
    assert "/bin/false does not run as a Python interpreter" in proc.stderr, proc.stderr


def test_an_unknown_architecture_is_refused(tmp_path):
    src = copy_of_the_script(tmp_path)
    proc = wheels(src, tmp_path, sys.executable, EPLOAD_WHEELS_ARCHES="x86_64 riscv64")
    assert proc.returncode == 1
    assert "EPLOAD_WHEELS_ARCHES: x86_64 or aarch64, not 'riscv64'" in proc.stderr, proc.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "dist").exists()


def test_a_tree_that_is_not_a_git_checkout_is_refused(tmp_path):
    src = copy_of_the_script(tmp_path)
    proc = wheels(src, tmp_path, sys.executable)
    assert proc.returncode == 1
    assert f"{src} is not a git checkout" in proc.stderr, proc.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "dist").exists()


def test_a_machine_without_git_is_told_to_install_it(tmp_path):
    src = copy_of_the_script(tmp_path)
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    # Every command of the machine but git.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name != "git" and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(d, name))
    proc = wheels(src, tmp_path, sys.executable, path=str(bin_dir))
    assert proc.returncode == 1
    assert "git is not installed (apt-get install git" in proc.stderr, proc.stderr
    assert not (tmp_path / "work").exists()

"""The scripts that prepare a machine (scripts/apt_install.sh) and check the
README's commands on a bare Debian root (scripts/debian_check.sh): the
inputs they refuse, each with a message saying what to do, before they touch
anything.  What they do on a real bare root is checked by running
`scripts/debian_check.sh bookworm|trixie --fresh` by hand (CONTRIBUTING.md)."""

import fcntl
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
APT_INSTALL = SOURCE_DIR / "scripts" / "apt_install.sh"
CHECK = SOURCE_DIR / "scripts" / "debian_check.sh"
CHECK13 = SOURCE_DIR / "scripts" / "debian13_check.sh"
NOBODY = 65534


def run(cmd, env=None, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=env, **kw)


def as_unprivileged(cmd):
    """cmd run by an ordinary user: as is when this test is not root, else
    through setpriv as nobody (what a user without root rights is)."""
    if os.getuid() != 0:
        return cmd
    return [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]


@pytest.fixture
def public_tmp():
    """A directory an unprivileged user can enter (pytest's are root's only)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="epload-setup-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def public_scripts():
    """scripts/ copied where an unprivileged user can read it: the checkout
    may live under a directory only root can enter (mktemp -d's is 0700)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="epload-scripts-"))
    path.chmod(0o755)
    shutil.copytree(SOURCE_DIR / "scripts", path / "scripts")
    yield path / "scripts"
    shutil.rmtree(path)


def no_sudo_path(tmp_path):
    """A PATH with bash, dpkg-query and grep but no sudo: a bare root's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dpkg-query", "grep", "id", "env"):
        (bindir / tool).symlink_to(shutil.which(tool))
    return str(bindir)


def test_apt_install_without_root_or_sudo_says_what_it_needs(public_tmp, public_scripts):
    env = {"PATH": no_sudo_path(public_tmp), "LANG": "C.UTF-8"}
    apt_install = public_scripts / APT_INSTALL.name
    out = run(as_unprivileged(["bash", apt_install, "setup", "epload-no-such-package"]), env=env)
    assert out.returncode == 1
    assert "setup: need root or sudo to install: epload-no-such-package" in out.stderr


def test_apt_install_with_everything_installed_does_nothing(public_scripts):
    # bash is installed everywhere: nothing to install, no root needed, silent.
    out = run(as_unprivileged(["bash", public_scripts / APT_INSTALL.name, "setup", "bash"]))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_check_refuses_an_unknown_release():
    for args in ([], ["bullseye"], ["--fresh"]):
        out = run([CHECK, *args])
        assert out.returncode == 1, args
        assert "first argument: bookworm (or 12) or trixie (or 13)" in out.stderr, args


def test_check_help_names_both_releases_and_fresh():
    out = run([CHECK, "--help"])
    assert out.returncode == 0
    assert "bookworm (or 12) or trixie (or 13)" in out.stdout
    assert "--fresh" in out.stdout


def test_check_needs_root(public_tmp, public_scripts):
    env = dict(os.environ, EPLOAD_DEBIAN_ROOT=str(public_tmp / "root"))
    out = run(as_unprivileged([public_scripts / CHECK.name, "bookworm"]), env=env)
    assert out.returncode == 1
    assert "run as root" in out.stderr
    assert list(public_tmp.iterdir()) == []


def test_check_refuses_a_root_another_check_uses(tmp_path):
    root = tmp_path / "root"
    env = dict(os.environ, EPLOAD_DEBIAN_ROOT=str(root))
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = run([CHECK, "trixie", "--fresh"], env=env)
    assert out.returncode == 1
    if os.getuid() == 0:
        assert f"another check is using {root}" in out.stderr
    else:
        assert "run as root" in out.stderr


def test_fresh_never_deletes_through_a_mount(tmp_path):
    # A check killed before its clean-up leaves the host's /dev bound in the
    # root: --fresh must stop, not remove what lies beneath.
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    keep = tmp_path / "host-dir"
    keep.mkdir()
    (keep / "precious").write_text("kept\n")
    env = dict(os.environ, EPLOAD_DEBIAN_ROOT=str(root))
    if os.getuid() != 0:
        out = run([CHECK, "bookworm", "--fresh"], env=env)
        assert "run as root" in out.stderr
    else:
        # A real bind mount, undone whatever happens (a chroot's / is no
        # mount point: unshare cannot make a private namespace there).
        subprocess.run(["mount", "--bind", str(keep), str(root / "dev")], check=True)
        try:
            out = run([CHECK, "bookworm", "--fresh"], env=env)
        finally:
            subprocess.run(["umount", str(root / "dev")], check=True)
        assert f"still mounted under {root} (unmount first): {root}/dev" in out.stderr
    assert out.returncode == 1
    assert (keep / "precious").read_text() == "kept\n"
    assert (root / "dev").is_dir()


def test_old_name_is_the_trixie_check(tmp_path):
    # The lock of the root EPLOAD_DEBIAN13_ROOT names is what stops it: the
    # old name reached debian_check.sh, with trixie and that root.
    root = tmp_path / "root"
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = run([CHECK13, "--fresh"], env=dict(os.environ, EPLOAD_DEBIAN13_ROOT=str(root)))
    assert out.returncode == 1
    if os.getuid() == 0:
        assert f"another check is using {root}" in out.stderr
    else:
        assert "run as root" in out.stderr

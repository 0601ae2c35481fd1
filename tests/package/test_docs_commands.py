"""Every shell block of README.md and docs/*.md, run as printed by a user who
installed the package: in a fresh venv (pip install of the checkout, as
test_pip_install.py installs it), activated the way `. venv/bin/activate`
does, from a new working directory, in the order the text gives (README
first, then docs/ by name); what a block exports holds for the next ones.

Each ```sh block is preceded by a marker, so that the choice is explicit:

  <!-- commands: run -->              each command succeeds, and epload warns of nothing
  <!-- commands: run; exits N -->     the block exits N (the text says it does),
                                      with a message on stderr
  <!-- commands: run; needs torch --> run in a venv with torch installed
  <!-- commands: skip: REASON -->     not run, for the reason given

A shell block without a marker fails the test.  torch is installed from
pip (`torch==2.13.0`, the version the project is tested with: CPython 3.11);
without a CPython 3.11 here the blocks that need it cannot run, and the test
is skipped, saying so."""

import os
import pathlib
import re
import subprocess

import pytest

from pkgenv import SOURCE_DIR, clean_env, fresh_venv, interpreters, pip_install_checkout, run

TORCH = "torch==2.13.0"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARKER = re.compile(r"<!-- commands: (run(?:; [^>]*?)?|skip: [^>]+?) -->\n\Z")


def documents():
    return [SOURCE_DIR / "README.md", *sorted((SOURCE_DIR / "docs").glob("*.md"))]


def blocks(path):
    """(line, marker, code) of each sh block of `path`, in order; marker is
    None when the block has none."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) not in ("sh", "bash", "shell", "console"):
            continue
        before = text[:m.start()]
        marker = MARKER.search(before)
        out.append((before.count("\n") + 1, marker.group(1) if marker else None, m.group(2)))
    return out


def test_every_shell_block_is_marked_run_or_skip():
    unmarked = [f"{p.relative_to(SOURCE_DIR)}:{line}" for p in documents() for line, marker, _ in blocks(p)
                if marker is None]
    assert unmarked == [], "shell blocks without a <!-- commands: run|skip: why --> marker: " + ", ".join(unmarked)
    # The README's quick starts are run, not skipped.
    readme = {line: marker for line, marker, _ in blocks(SOURCE_DIR / "README.md")}
    assert sum(m.startswith("run") for m in readme.values()) >= 4, readme


def test_the_marker_rule_finds_what_it_must(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("a\n\n<!-- commands: run; exits 1 -->\n```sh\nfalse\n```\n\ntext\n\n```sh\ntrue\n```\n"
                   "<!-- commands: skip: why -->\n```python\nx\n```\n")
    assert blocks(doc) == [(4, "run; exits 1", "false\n"), (10, None, "true\n")]


def to_run():
    """(where, options, code) of every block to run, in order."""
    out = []
    for path in documents():
        for line, marker, code in blocks(path):
            if marker and marker.startswith("run"):
                options = dict(o.partition(" ")[::2] for o in marker.split("; ")[1:])
                out.append((f"{path.relative_to(SOURCE_DIR)}:{line}", options, code))
    return out


def py311():
    return next((f for f in interpreters() if f["version"] == (3, 11)), None)


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A fresh venv with the checkout installed (and torch, when a block
    needs it), and the environment of a shell that activated it."""
    f = py311()
    if f is None:
        pytest.skip(f"no CPython 3.11 here for {TORCH}, which the PyTorch quick starts need")
    venv = fresh_venv(f, "docs-venv")
    python = venv / "bin" / "python"
    pip_install_checkout(python, f)
    if any("needs" in options for _, options, _ in to_run()):
        run([python, "-m", "pip", "install", "-q", TORCH])
    home = tmp_path_factory.mktemp("user")
    env = clean_env(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                    XDG_CACHE_HOME=str(home / ".cache"))
    env.pop("PYTHONSAFEPATH", None)
    return home, env


def test_the_commands_run_as_printed(user):
    home, env = user
    state = home / ".state.sh"
    state.write_text("")
    for where, options, code in to_run():
        script = f"set -e\n. {state}\n{code}\nexport -p > {state}\n"
        proc = subprocess.run(["bash", "-c", script], cwd=home, env=env, capture_output=True, text=True,
                              timeout=1800)
        shown = f"{where}:\n{code}\nexit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        want = int(options.get("exits", "0"))
        assert proc.returncode == want, shown
        if want:
            assert proc.stderr.strip(), shown
        else:
            # epload's own warnings (torch's, e.g. about numpy, are not the text's business)
            assert "epload: warning" not in proc.stderr and "RuntimeWarning:" not in proc.stderr, shown


def test_the_readme_has_no_link_a_package_page_cannot_follow():
    """README.md is the package's long description: a relative link there
    leads nowhere, and the package has no repository address to make it
    absolute.  Files of the repository are named, not linked."""
    text = (SOURCE_DIR / "README.md").read_text()
    relative = re.findall(r"\]\((?!https?://)[^)]*\)|(?:src|href)=\"(?!https?://)[^\"]*\"", text)
    assert relative == [], relative

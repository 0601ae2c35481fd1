"""CPython's own importlib.metadata tests pass with
``importlib.metadata.entry_points = epload.entry_points`` in place
(cpython_metadata_suite.py runs them in a fresh interpreter and reports).
The tests come from Debian's libpython3.X-testsuite for the interpreter under
test (scripts/setup.sh installs it); without them this fails, saying so."""

import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


def test_cpython_importlib_metadata_suite_passes_with_epload_patched_in(tmp_path):
    probe = subprocess.run([PYTHON, "-c", "import sys, test.test_importlib; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True)
    version = subprocess.run([PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
    assert probe.returncode == 0, (
        f"CPython's test suite is not installed for {PYTHON}: install Debian's "
        f"libpython{version}-testsuite (scripts/setup.sh does)\n{probe.stderr}")
    env = dict(os.environ, EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("EPLOAD_DEBUG", None)
    p = subprocess.run([PYTHON, str(HERE / "cpython_metadata_suite.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert not report["failures"], "\n\n".join(report["failures"])[-8000:]
    # Proof that it ran, and ran through epload: the test modules were found,
    # tests ran, the patch stayed in place, epload answered calls from its
    # index and handed others (zips, other finders) back to importlib's
    # original without recursing.
    assert report["modules"] and report["run"] >= 50, report
    assert report["still_patched"], report
    assert report["counts"]["answered"] > 0 and report["counts"]["handed_back"] > 0, report
    assert report["walks"]["answered"] > 0 and report["walks"]["handed_back"] > 0, report
    print(f"{report['run']} tests ({report['skipped']} skipped) of {report['modules']} on "
          f"Python {report['python'].split()[0]}: {report['counts']}, walks {report['walks']}", file=sys.stderr)

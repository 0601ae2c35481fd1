"""The shared switch/store table (tests/rules/cases.json) against the Python
front: epload.autoload inside a real host module's import, in a fresh
interpreter.  tests/cli/test_rules.py runs the same table against the CLI."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / 'rules'))

from fronts import CASES, Setup  # noqa: E402


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_python_front_answers_the_table(tmp_path, case):
    setup = Setup(tmp_path, case)
    assert setup.python(case.get('env')) == case['expect']

"""The shared switch/store table (tests/rules/cases.json) against the CLI:
`epload load` and `epload devices` on the sys.path of the interpreter the
Python front runs in, with the same cache directory, so devices learned by
Python runs are the CLI's too.  tests/py/test_rules.py runs the same table
against the Python front."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / 'rules'))

from fronts import CASES, Setup  # noqa: E402


@pytest.mark.parametrize('case', CASES, ids=[c['name'] for c in CASES])
def test_cli_answers_the_table(tmp_path, case):
    setup = Setup(tmp_path, case)
    assert setup.cli(case.get('env')) == case['expect']

#!/usr/bin/python3
"""Entry point of the harness's suite_refresh (scripts/harness/suite_refresh.py; --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.suite_refresh import main  # noqa: E402

sys.exit(main())

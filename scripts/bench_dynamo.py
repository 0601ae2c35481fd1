#!/usr/bin/python3
"""Entry point of the harness's suite_dynamo (scripts/harness/suite_dynamo.py; --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.suite_dynamo import main  # noqa: E402

sys.exit(main())

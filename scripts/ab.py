#!/usr/bin/python3
"""Entry point of the harness's ab (scripts/harness/ab.py; --help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness.ab import main  # noqa: E402

sys.exit(main())

#!/usr/bin/python3
"""Entry point of scripts/harness/demo.py (--help)."""
import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import proc, demo  # noqa: E402
sys.exit(proc.harness_main(demo))

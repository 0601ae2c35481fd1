#!/usr/bin/python3
"""Entry point of scripts/harness/suite_hosts.py (--help)."""
import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import proc, suite_hosts  # noqa: E402
sys.exit(proc.harness_main(suite_hosts))

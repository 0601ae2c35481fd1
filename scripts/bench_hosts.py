#!/usr/bin/python3
"""Runs the harness suite epload.bench.suite_hosts (python/epload/bench/; --help)."""
import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: E402
sys.exit(_bench.main("suite_hosts"))

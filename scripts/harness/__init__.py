"""epload's benchmark harness: the suites (suite_*, demo, gate, ab) on top of
envs, proc, stats, targets, options, verify and report (CONTRIBUTING.md)."""

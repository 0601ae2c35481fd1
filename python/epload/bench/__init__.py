"""epload's benchmark harness.  `python -m epload.bench` (user.py) measures
this environment's `import torch`, stock autoload against epload, and gates
it; the repository's suites (suite_*, demo, gate, ab) run on the same modules:
envs, proc, stats, targets, options, verify, report, plot, and gen_env (the
environment generator) (CONTRIBUTING.md)."""

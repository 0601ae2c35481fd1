"""`python -m epload.bench` (and `epload bench`): the user's benchmark and
gate, epload.bench.user (--help)."""

import sys

from .user import main

sys.exit(main())

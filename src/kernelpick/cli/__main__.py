"""`python -m kernelpick.cli ...`: the `kernelpick` command."""

from __future__ import annotations

import sys

from kernelpick.cli import main

sys.exit(main())

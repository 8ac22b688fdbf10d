"""Every `kernelpick ...` command, one module per command group; `main` runs one (the console script)."""

from __future__ import annotations

from kernelpick.cli.commands import main

__all__ = ["main"]

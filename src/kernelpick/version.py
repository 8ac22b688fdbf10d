"""kernelpick's version: `kernelpick.__version__` and `kernelpick --version` read it here."""

from __future__ import annotations

__version__ = "0.1.0"

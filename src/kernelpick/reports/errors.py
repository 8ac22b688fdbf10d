"""The error reports raise: a log, store or kernel to report on that is not there, or no matplotlib."""

from __future__ import annotations

from kernelpick.errors import KernelpickError


class ReportError(KernelpickError, ValueError):
    """A report cannot be made from what it was given; the message says what to give instead."""

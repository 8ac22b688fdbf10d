"""Reports people look at: the tuning log (`KERNELPICK_LOG`), roofline figures, tables, plots and a page."""

from __future__ import annotations

from kernelpick.reports.errors import ReportError
from kernelpick.reports.log import log_tuning, read_log
from kernelpick.reports.roofline import DevicePeaks, Roofline, device_peaks, roofline
from kernelpick.reports.work import Work, forget_work, work

__all__ = [
    "DevicePeaks",
    "ReportError",
    "Roofline",
    "Work",
    "device_peaks",
    "forget_work",
    "log_tuning",
    "read_log",
    "roofline",
    "work",
]

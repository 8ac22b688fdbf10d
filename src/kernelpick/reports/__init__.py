"""Reports people look at: the tuning log (`KERNELPICK_LOG`), roofline figures, tables, plots and a page."""

from __future__ import annotations

from kernelpick.engine.record import log_tuning
from kernelpick.errors import ReportError
from kernelpick.reports.data import Candidate, Report, TunedKey, load_report, read_log
from kernelpick.reports.page import render_html, write_html
from kernelpick.reports.plots import Plot, plots_of, write_pngs
from kernelpick.reports.roofline import DevicePeaks, Roofline, device_peaks, roofline
from kernelpick.reports.search import LoggedSearch
from kernelpick.work import Work, forget_work, work

__all__ = [
    "Candidate",
    "DevicePeaks",
    "LoggedSearch",
    "Plot",
    "Report",
    "ReportError",
    "Roofline",
    "TunedKey",
    "Work",
    "device_peaks",
    "forget_work",
    "load_report",
    "log_tuning",
    "plots_of",
    "read_log",
    "render_html",
    "roofline",
    "work",
    "write_html",
    "write_pngs",
]

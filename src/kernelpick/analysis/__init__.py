"""Access analysis: which arguments a Triton kernel reads and writes, from its TTIR, without a GPU."""

from __future__ import annotations

from kernelpick.analysis.analyze import KernelAccess, analyze, clear_cache, written_arguments
from kernelpick.analysis.command import format_access, load_kernel, parse_spec, run_analyze

__all__ = [
    "KernelAccess",
    "analyze",
    "clear_cache",
    "format_access",
    "load_kernel",
    "parse_spec",
    "run_analyze",
    "written_arguments",
]

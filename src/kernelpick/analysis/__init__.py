"""Access analysis: which arguments a Triton kernel reads and writes, from its TTIR, without a GPU."""

from __future__ import annotations

from kernelpick.analysis.kernel_access import KernelAccess, analyze, clear_cache, written_arguments

__all__ = ["KernelAccess", "analyze", "clear_cache", "written_arguments"]

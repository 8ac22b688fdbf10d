"""Tuning jobs: `kernelpick tune SPEC.py` over this process, the GPUs of a host, or a Ray cluster."""

from __future__ import annotations

from kernelpick.jobs.spec import Job, JobOutcome, Journal, Spec, load_spec, recorded_jobs, tensor

__all__ = ["Job", "JobOutcome", "Journal", "Spec", "load_spec", "recorded_jobs", "tensor"]

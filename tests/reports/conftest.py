"""Report test set-up: one tuning log written by real interpreted tunings, shared by the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpick import settings
from tests.reports.samples import tune_for_real


@pytest.fixture(scope="session")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tuning log of `add_kernel` tuned for n=1000 and n=3000 and of the `add` selector (read-only:
    copy it to change it)."""
    folder = tmp_path_factory.mktemp("real-log")
    with settings.override(cache_dir=folder / "cache"):
        tune_for_real(folder / "tunings.jsonl")
    return folder / "tunings.jsonl"

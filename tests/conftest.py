"""Shared test set-up: an isolated store per test, the `gpu` marker skipped without a GPU, and one tuning
log written by real interpreted tunings, shared by the log, report and command tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Tests run kernels in Triton's interpreter through kernelpick, never through TRITON_INTERPRET.
os.environ.pop("TRITON_INTERPRET", None)

from kernelpick import settings
from tests.reports.samples import tune_for_real

# One intra-op thread: with two, on a machine also running something else, each parallel CPU op of
# torch waits for a descheduled thread (the reference `torch.mm` twice then SiLU at 12x22x18 timed 25-32
# ms against 0.01 alone), so interpreted templates won selections that tests expect torch to win.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path: Path) -> Iterator[settings.Settings]:
    """Every test gets its own empty store and no stray environment settings."""
    with settings.override(cache_dir=tmp_path / "kernelpick-cache") as scoped:
        yield scoped


@pytest.fixture(scope="session")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tuning log of `add_kernel` tuned for n=1000 and n=3000 and of the `add` selector (read-only:
    copy it to change it)."""
    folder = tmp_path_factory.mktemp("real-log")
    with settings.override(cache_dir=folder / "cache"):
        tune_for_real(folder / "tunings.jsonl")
    return folder / "tunings.jsonl"

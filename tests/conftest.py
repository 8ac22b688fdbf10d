"""Shared test set-up: an isolated store per test, and the `gpu` marker skipped without a GPU."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Tests run kernels in Triton's interpreter through kernelpick, never through TRITON_INTERPRET.
os.environ.pop("TRITON_INTERPRET", None)

from kernelpick import settings


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

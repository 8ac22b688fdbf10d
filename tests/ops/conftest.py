"""Fixtures of the kernelpick.ops tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelpick import settings


@pytest.fixture
def shapes_as_arguments() -> Iterator[None]:
    """KERNELPICK_OPS_STATIC_SHAPES=0, with the ops' selectors made afresh (they read it as they
    are made) and the earlier ones back after. The registry is emptied in place: `scaled_mm` holds
    it by name too."""
    from kernelpick.ops import gemm

    earlier = dict(gemm._selectors)
    gemm._selectors.clear()
    try:
        with settings.override(ops_static_shapes=False):
            yield
    finally:
        gemm._selectors.clear()
        gemm._selectors.update(earlier)

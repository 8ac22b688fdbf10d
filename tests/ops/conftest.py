"""Fixtures of the kernelpick.ops tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelpick import settings
from kernelpick.ops.gemm import fresh_selectors


@pytest.fixture
def shapes_as_arguments() -> Iterator[None]:
    """KERNELPICK_OPS_STATIC_SHAPES=0, with the ops' selectors made afresh (they read it as they
    are made) and the earlier ones back after."""
    with fresh_selectors(), settings.override(ops_static_shapes=False):
        yield

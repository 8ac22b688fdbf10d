"""Fixtures of the kernelpick.ops tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelpick import settings
from kernelpick.ops.gemm import fresh_selectors


@pytest.fixture
def shapes_baked() -> Iterator[None]:
    """KERNELPICK_OPS_STATIC_SHAPES=1 (the default is off), with the ops' selectors made afresh (they
    read it as they are made) and the earlier ones back after."""
    with fresh_selectors(), settings.override(ops_static_shapes=True):
        yield


@pytest.fixture(params=[False, True], ids=["sizes-passed", "sizes-baked"])
def either_shapes(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test once with sizes passed (the default) and once baked into the templates' source."""
    with fresh_selectors(), settings.override(ops_static_shapes=request.param):
        yield request.param

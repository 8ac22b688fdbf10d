"""engine/eligibility.py: choices a device cannot run are skipped before compiling, saying why."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import triton

from kernelpick import (
    Config,
    Requirements,
    Selector,
    TritonTemplate,
    extern,
    require,
    template,
    triton_choice,
)
from kernelpick.device import DeviceInfo
from kernelpick.engine.eligibility import SkippedChoice, eligible_spaces
from kernelpick.errors import ConfigError, NoValidChoices
from tests.tune.kernels import add_kernel

CPU_REASON = "needs a GPU with sm_90+; this is the cpu, in Triton's interpreter"


def bind(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    out = torch.empty_like(x)
    return (x, y, out, x.numel()), out


def hopper_only(**kwargs: Any) -> Any:
    configs = [Config({"BLOCK": 64})]
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    return require(
        triton_choice(add_kernel, grid=grid, configs=configs, bind=bind, **kwargs), min_capability=(9, 0)
    )


def test_a_choice_the_device_cannot_run_is_skipped_and_the_record_says_why() -> None:
    selector = Selector("add", [extern(torch.add), hopper_only()])
    x, y = torch.randn(100), torch.randn(100)
    assert [c.name for c in selector.choices_for(x, y)] == ["torch.add"]
    assert torch.equal(selector(x, y), x + y)
    record = selector.last_selection
    assert record is not None and [r.name for r in record.candidates] == ["torch.add"]  # never compiled
    assert record.skipped == (SkippedChoice("add_kernel", CPU_REASON),)
    assert record.to_dict()["skipped"] == [{"name": "add_kernel", "reason": CPU_REASON}]
    assert f"skipped add_kernel: {CPU_REASON}" in str(record.table().caption)


def test_a_device_that_meets_the_requirements_keeps_the_choice() -> None:
    h100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
    a100 = DeviceInfo("cuda", 0, "NVIDIA A100-SXM4-80GB", (8, 0), 40 * 2**20, 108)
    spaces = [extern(torch.add), hopper_only(name="fast_add")]
    kept, skipped = eligible_spaces(spaces, h100)
    assert kept == spaces and skipped == ()
    kept, skipped = eligible_spaces(spaces, a100)
    assert kept == spaces[:1]
    assert skipped == (SkippedChoice("fast_add", "needs sm_90 or newer; NVIDIA A100-SXM4-80GB is sm_80"),)


def test_a_template_declares_its_requirements_for_all_its_choices() -> None:
    source = """
{{ def_kernel() }}
    offsets = tl.arange(0, BLOCK)
    {{ store_output(("offsets",), "tl.load(X + offsets)", "offsets < BLOCK") }}
"""
    copy = TritonTemplate(
        "copy",
        source,
        inputs=("X",),
        output=lambda x: (x.size, x.dtype),
        grid=lambda context: (1,),
        requires=Requirements(tma=True),
    )
    selector = Selector("copy", [extern(torch.clone), template(copy, configs=[Config({"BLOCK": 16})])])
    record = selector.tune(torch.randn(16))
    assert [s.name for s in record.skipped] == ["copy"] and "sm_90+, TMA" in record.skipped[0].reason


def test_when_every_choice_is_skipped_the_error_gives_the_reasons() -> None:
    selector = Selector("add", [hopper_only()])
    with pytest.raises(
        NoValidChoices, match=re.escape(f"skipped on this device; skipped add_kernel: {CPU_REASON}")
    ):
        selector(torch.randn(8), torch.randn(8))


def test_require_takes_requirements_or_their_fields_and_refuses_anything_else() -> None:
    wrapped = require(extern(torch.add), Requirements(big_gpu=True))
    assert wrapped.requires == Requirements(big_gpu=True) and wrapped.name == "torch.add"
    assert "68+ SMs" in repr(wrapped)
    with pytest.raises(ConfigError, match="takes gpu, min_capability, big_gpu, tma, min_shared_memory"):
        require(extern(torch.add), sm=90)
    with pytest.raises(ConfigError, match="not both"):
        require(extern(torch.add), Requirements(), gpu=True)
    with pytest.raises(ConfigError, match="expects a choice"):
        require(torch.add, gpu=True)  # type: ignore[arg-type]

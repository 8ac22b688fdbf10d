"""FLOPs and bytes of a tuned call: built in for the GEMM selectors, registered by users for their kernels."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch

from kernelpick.engine.record import selection_key
from kernelpick.engine.signature import Signature
from kernelpick.reports import ReportError, work
from kernelpick.work import forget_work, work_of


def key_of(*tensors: torch.Tensor) -> dict[str, object]:
    return selection_key(Signature.of(tensors, {}).to_data())


@pytest.fixture
def registered() -> Iterator[None]:
    yield
    for name in ("my_matmul", "broken", "mm"):
        forget_work(name)


@pytest.mark.parametrize("name", ["mm", "kernelpick.ops.mm", "kernelpick.ops.mm_tf32"])
def test_a_matrix_product_does_two_m_n_k_flops_and_moves_its_three_matrices(name: str) -> None:
    m, k, n = 96, 64, 32
    flops, moved = work_of(
        name, key_of(torch.empty(m, k, dtype=torch.float16), torch.empty(k, n, dtype=torch.float16))
    )
    assert flops == 2 * m * n * k
    assert moved == (m * k + k * n + m * n) * 2


def test_a_batched_product_counts_every_batch_and_addmm_its_bias() -> None:
    batched = key_of(torch.empty(3, 8, 16), torch.empty(3, 16, 4))
    assert work_of("kernelpick.ops.bmm", batched) == (2 * 3 * 8 * 4 * 16, 3 * (8 * 16 + 16 * 4 + 8 * 4) * 4)
    with_bias = key_of(
        torch.empty(4, dtype=torch.bfloat16),
        torch.empty(8, 16, dtype=torch.bfloat16),
        torch.empty(16, 4, dtype=torch.bfloat16),
    )
    assert work_of("kernelpick.ops.addmm_relu", with_bias) == (
        2 * 8 * 4 * 16,
        (8 * 16 + 16 * 4 + 8 * 4 + 4) * 2,
    )


def test_an_fp8_product_moves_one_byte_a_value_its_scales_and_an_output_of_the_selectors_dtype() -> None:
    m, k, n = 16, 64, 32
    a = torch.empty(m, k).to(torch.float8_e4m3fn)
    b = torch.empty(n, k).to(torch.float8_e4m3fn).t()
    per_row = key_of(a, b, torch.ones(m, 1), torch.ones(1, n))
    assert work_of("kernelpick.ops.scaled_mm_bf16", per_row) == (
        2 * m * n * k,
        m * k + k * n + 4 * (m + n) + 2 * m * n,
    )
    assert work_of("kernelpick.ops.scaled_mm_fast_fp32", per_row) == (
        2 * m * n * k,
        m * k + k * n + 4 * (m + n) + 4 * m * n,
    )
    bias = key_of(a, b, torch.ones(()), torch.ones(()), torch.empty(n, dtype=torch.float16))
    assert work_of("kernelpick.ops.scaled_mm_bias_fp16", bias) == (
        2 * m * n * k,
        m * k + k * n + 4 * 2 + 2 * n + 2 * m * n,
    )
    assert work_of("scaled_mm", per_row) == (
        None,
        None,
    )  # a user's selector of that name: its output dtype is unknown


def test_other_kernels_and_shapes_that_do_not_multiply_have_no_figures() -> None:
    assert work_of("add", key_of(torch.empty(8, 8), torch.empty(8, 8))) == (None, None)
    assert work_of("mm", key_of(torch.empty(8, 3), torch.empty(4, 8))) == (None, None)


def test_registered_work_is_a_function_of_the_named_key_values(registered: None) -> None:
    work("my_matmul", flops=lambda key: 2 * key["M"] * key["N"] * key["K"], bytes=1e6)
    assert work_of("my_matmul", {"M": 4, "N": 8, "K": 16, "dtypes": ["float16"]}) == (1024.0, 1e6)
    work("mm", flops=1.0)  # a registration wins over the built-in figures
    assert work_of("mm", key_of(torch.empty(8, 8), torch.empty(8, 8))) == (1.0, None)


def test_a_failing_work_function_gives_no_figures_and_one_warning(
    registered: None, caplog: pytest.LogCaptureFixture
) -> None:
    work("broken", flops=lambda key: key["missing"])
    with caplog.at_level(logging.WARNING, logger="kernelpick.reports"):
        assert work_of("broken", {"n": 1}) == (None, None)
        assert work_of("broken", {"n": 2}) == (None, None)
    assert caplog.text.count("the work function of broken failed") == 1


def test_a_name_whose_flops_and_bytes_both_fail_costs_one_warning_until_registered_again(
    registered: None, caplog: pytest.LogCaptureFixture
) -> None:
    # One warning per name, as work_of says, however many of its figures fail; registering the name
    # again (a mended function, say) lets a new failure be said.
    work("broken", flops=lambda key: key["missing"], bytes=lambda key: key["missing"])
    with caplog.at_level(logging.WARNING, logger="kernelpick.reports"):
        assert work_of("broken", {"n": 1}) == (None, None)
        assert work_of("broken", {"n": 2}) == (None, None)
    assert caplog.text.count("the work function of broken failed") == 1
    work("broken", flops=lambda key: key["still_missing"])
    with caplog.at_level(logging.WARNING, logger="kernelpick.reports"):
        assert work_of("broken", {"n": 3}) == (None, None)
    assert caplog.text.count("the work function of broken failed") == 2


def test_work_needs_a_number_or_a_function() -> None:
    with pytest.raises(ReportError, match="needs flops=, bytes= or both"):
        work("my_matmul")
    with pytest.raises(
        ReportError, match=r"flops=\.\.\.\) must be a number or a function of the key, got str"
    ):
        work("my_matmul", flops="2*M*N*K")  # type: ignore[arg-type]

"""The `kernelpick analyze` command's functions: specs, kernel loading, printing, and the whole run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from triton._utils import type_canonicalisation_dict
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.analysis import analyze
from kernelpick.cli.analyze import (
    TENSOR_DTYPES,
    format_access,
    load_kernel,
    parse_arguments,
    parse_spec,
    run_analyze,
)
from kernelpick.errors import AnalysisError, KernelpickError

#: The access-analysis tests' kernels, which the command loads by file and by module name.
CORPUS = Path(__file__).parents[1] / "analysis"
CONTROL = str(CORPUS / "corpus_control.py")
MEMORY = str(CORPUS / "corpus_memory.py")


@pytest.fixture(autouse=True)
def corpus_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus modules import each other by name, as from their own folder (on the path there)."""
    monkeypatch.syspath_prepend(str(CORPUS))


@pytest.mark.parametrize(
    ("spec", "dtype", "shape"),
    [
        ("f32[1024]", torch.float32, [1024]),
        ("bf16[64,64]", torch.bfloat16, [64, 64]),
        ("i8[ 3, 4 ,5]", torch.int8, [3, 4, 5]),
    ],
)
def test_tensor_specs_make_meta_tensors(spec: str, dtype: torch.dtype, shape: list[int]) -> None:
    value = parse_spec(spec)
    assert isinstance(value, torch.Tensor) and value.is_meta
    assert value.dtype == dtype and list(value.shape) == shape


def test_every_torch_dtype_triton_takes_has_a_tensor_spec() -> None:
    taken = {
        d
        for d in vars(torch).values()
        if isinstance(d, torch.dtype) and str(d).split(".")[-1] in type_canonicalisation_dict
    }
    taken -= {torch.int1, torch.uint1}  # torch's 1-bit shell dtypes (no fill, no copy); users write bool
    assert sorted(str(d) for d in taken - set(TENSOR_DTYPES.values())) == []
    assert parse_spec("f8e4m3[16]").dtype == torch.float8_e4m3fn
    assert parse_spec("u32[16]").dtype == torch.uint32


def test_descriptor_spec() -> None:
    value = parse_spec("f16[64,32]/[16,16]")
    assert isinstance(value, TensorDescriptor)
    assert list(value.block_shape) == [16, 16] and value.base.dtype == torch.float16


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ("i32", 3),
        ("fp32", 3.5),
        ("f32", 3.5),
        ("bool", True),
        ("64", 64),
        ("-2", -2),
        ("0.5", 0.5),
        ("true", True),
        ("False", False),
        ("none", None),
        ("'tanh'", "tanh"),
    ],
)
def test_scalar_and_value_specs(spec: str, value: object) -> None:
    assert parse_spec(spec) == value and type(parse_spec(spec)) is type(value)


def test_scalar_type_values_avoid_triton_special_cases() -> None:
    """Triton makes 1 a constant and gives multiples of 16 a divisibility hint; i64/u64 must not fit a smaller type."""
    assert parse_spec("i32") not in (0, 1) and parse_spec("i32") % 16
    assert parse_spec("i64") >= 2**31 and parse_spec("u64") >= 2**63


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("f33[4]", "unknown element type `f33`"),
        ("f32[0]", "must be positive integers"),
        ("f32[4x4]", "must be positive integers"),
        ("f32[4,4]/[2]", "one size per dimension"),
        ("f16", "not a scalar type Triton can take"),
        ("tensor", "cannot read the argument spec"),
    ],
)
def test_bad_specs_are_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(AnalysisError, match=message):
        parse_spec(spec)


def test_arguments_need_name_equals_spec() -> None:
    with pytest.raises(AnalysisError, match="expected --arg NAME=SPEC"):
        parse_arguments(["x_ptr"])
    with pytest.raises(AnalysisError, match="given twice"):
        parse_arguments(["n=3", "n=4"])
    with pytest.raises(AnalysisError, match="--arg x: unknown element type"):
        parse_arguments(["x=q8[4]"])


def test_load_kernel_from_a_file_and_from_a_module(tmp_path: Path) -> None:
    assert load_kernel(f"{CONTROL}:copy").__name__ == "copy"
    assert load_kernel("access_corpus:copy").__name__ == "copy"  # an importable module
    script = tmp_path / "mine.py"
    script.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n\nNOT_A_KERNEL = 3\n")
    assert load_kernel(f"{script}:k").__name__ == "k"
    with pytest.raises(AnalysisError, match="has no `kk`; the Triton kernels it defines are: k"):
        load_kernel(f"{script}:kk")
    with pytest.raises(AnalysisError, match=r"is a int, not a @triton\.jit kernel"):
        load_kernel(f"{script}:NOT_A_KERNEL")


def test_load_kernel_errors(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError, match=r"expected FILE\.py:KERNEL"):
        load_kernel("kernels.py")
    with pytest.raises(AnalysisError, match="no such file"):
        load_kernel(f"{tmp_path}/missing.py:k")
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('bad module')\n")
    with pytest.raises(AnalysisError, match=r"importing .* raised ValueError: bad module"):
        load_kernel(f"{broken}:k")
    with pytest.raises(AnalysisError, match="cannot import `no_such_module_here`"):
        load_kernel("no_such_module_here:k")


def test_run_analyze_prints_each_argument() -> None:
    text = run_analyze(f"{CONTROL}:add_inplace", ["x_ptr=f32[1024]", "y_ptr=f32[1024]", "n=i32", "BLOCK=64"])
    assert text.splitlines() == [
        "kernel add_inplace: exact",
        "  x_ptr  both",
        "  y_ptr  read",
        "  n      untouched",
    ]


def test_run_analyze_json() -> None:
    text = run_analyze(
        f"{CONTROL}:copy", ["x_ptr=f32[1024]", "y_ptr=f32[1024]", "n=i32", "BLOCK=64"], as_json=True
    )
    data = json.loads(text)
    assert data["arguments"] == {"x_ptr": "read", "y_ptr": "written", "n": "untouched"}
    assert data["certain"] is True and data["mutated"] == ["y_ptr"]


def test_uncertain_answer_prints_the_reason() -> None:
    text = run_analyze(f"{MEMORY}:pointer_table_store", ["table_ptr=i64[8]", "x_ptr=f32[64]", "BLOCK=16"])
    assert "kernel pointer_table_store: conservative" in text
    assert "conservative because: writes through a pointer loaded from `table_ptr`" in text


def test_run_analyze_missing_argument_says_how_to_give_it() -> None:
    with pytest.raises(AnalysisError, match=r"missing `y_ptr`, `BLOCK`; give each as --arg NAME=SPEC"):
        run_analyze(f"{CONTROL}:copy", ["x_ptr=f32[1024]", "n=i32"])


def test_run_analyze_bad_spec_and_unknown_argument() -> None:
    with pytest.raises(KernelpickError, match="--arg n: cannot read the argument spec `int33`"):
        run_analyze(f"{CONTROL}:copy", ["x_ptr=f32[8]", "y_ptr=f32[8]", "n=int33", "BLOCK=64"])
    with pytest.raises(AnalysisError, match="no argument `BLOK`"):
        run_analyze(f"{CONTROL}:copy", ["x_ptr=f32[8]", "y_ptr=f32[8]", "n=i32", "BLOCK=64", "BLOK=3"])


def test_format_access_of_a_direct_analysis() -> None:
    from access_corpus import copy, f32

    access = analyze(copy, f32(), f32(), 8, BLOCK=16)
    assert json.loads(format_access(access, as_json=True))["kernel"] == "copy"

"""Checking a choice's output against the reference's, with tolerances that suit the dtype."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernelpick.bench.benchmarker import MEASUREMENT_VERSION

#: Part of every selector's store key: bump when the way choices are verified changes (how they are
#: timed is `MEASUREMENT_VERSION`'s). The text stays "select-...": stored keys hold it.
VERIFICATION_VERSION = f"select-1:{MEASUREMENT_VERSION}"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far an output may be from the reference: relative, and absolute in units of the output's RMS."""

    rtol: float
    atol: float

    def __str__(self) -> str:
        return f"rtol={self.rtol:g}, atol={self.atol:g}×rms"


#: Per output dtype. Half precision outputs may differ by about one unit in the last place.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-7, 1e-7),
    torch.float32: Tolerance(1e-4, 1e-4),
    torch.float16: Tolerance(2e-3, 2e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1e-2),
    torch.complex64: Tolerance(1e-4, 1e-4),
    torch.complex128: Tolerance(1e-7, 1e-7),
}
#: float32 outputs of matrix products that may use TensorFloat-32 (10-bit mantissa) inputs.
TF32_TOLERANCE = Tolerance(1e-2, 1e-2)
#: Any other floating dtype (float8 variants).
LOW_PRECISION_TOLERANCE = Tolerance(0.125, 0.125)


#: What `torch.backends.cuda.matmul.allow_tf32` returns, read without its module's slow `__getattr__`
#: (on the eager path of every float32 `kernelpick.ops` call on a GPU).
_cublas_allow_tf32 = torch._C._get_cublas_allow_tf32


def tf32_allowed() -> bool:
    """Whether float32 matrix products on CUDA may use TensorFloat-32 (`torch.backends.cuda.matmul.allow_tf32`)."""
    try:
        return bool(_cublas_allow_tf32())
    except Exception:  # set through `fp32_precision`, which the legacy flag refuses to read
        return str(getattr(torch.backends.cuda.matmul, "fp32_precision", "ieee")) == "tf32"


def tolerance_for(dtype: torch.dtype, *, tf32: bool = False) -> Tolerance | None:
    """The tolerance for outputs of `dtype` (None: must be equal, for integers and booleans)."""
    if dtype == torch.float32 and tf32:
        return TF32_TOLERANCE
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point or dtype.is_complex:
        return LOW_PRECISION_TOLERANCE
    return None


#: A floating reference prepared (`Expected._widened`), or why nothing can be checked against it.
_Widened = tuple[torch.Tensor, "torch.Tensor | None", float, torch.Tensor] | str


class Expected:
    """The reference's output, prepared once for checking many outputs against it (widened, its NaN,
    infinities and RMS found: per output, that was as much work as the check). Tensors are compared by
    size, dtype and values (within `tolerance`, default: by dtype; `tf32`: float32 products may have
    used TensorFloat-32), tuples and lists element by element, anything else with `==`."""

    def __init__(self, expected: Any, tolerance: Tolerance | None = None, tf32: bool = False) -> None:
        self.expected, self.tolerance = expected, tolerance
        listed = isinstance(expected, (tuple, list))
        self._parts = [Expected(e, tolerance, tf32) for e in expected] if listed else None
        self._wide: _Widened | None = None  # None: compared for equality
        if isinstance(expected, torch.Tensor):  # now: the example's tensors may be restored before a check
            self.tolerance = tolerance or tolerance_for(expected.dtype, tf32=tf32)
            self._wide = None if self.tolerance is None else self._widened(self.tolerance)

    def why(self, output: Any, where: str = "output") -> str | None:
        """Why `output` does not match (None when it does)."""
        expected = self.expected
        if isinstance(expected, torch.Tensor):
            if not isinstance(output, torch.Tensor):
                return f"{where} is a {type(output).__name__}, the reference gives a tensor"
            return self._compare_tensor(output, where)
        if self._parts is not None:
            if not isinstance(output, (tuple, list)) or len(output) != len(self._parts):
                return f"{where} is {_describe(output)}, the reference gives {_describe(expected)}"
            for index, (got, part) in enumerate(zip(output, self._parts)):
                reason = part.why(got, f"{where}[{index}]")
                if reason is not None:
                    return reason
            return None
        if output is expected:
            return None
        try:
            equal = bool(output == expected)
        except Exception:
            equal = False
        return None if equal else f"{where} is {output!r}, the reference gives {expected!r}"

    def _widened(self, tolerance: Tolerance) -> _Widened:
        """The reference widened, the mask of its finite values (None: all are), its RMS over them and
        the tolerance each finite value allows; or why nothing can be checked against it."""
        want = self._widen(self.expected)
        if bool(torch.isnan(want).any()):
            return (
                "the reference output has NaN on the example inputs, so {where} cannot be verified: "
                "give the selector an input_gen that makes valid inputs, or verify=False"
            )
        finite = torch.isfinite(want)
        mask = None if bool(finite.all()) else finite
        values = want if mask is None else want[mask]
        scale = (float(torch.sqrt(torch.mean(values * values))) if values.numel() else 0.0) or 1.0
        return want, mask, scale, tolerance.atol * scale + tolerance.rtol * values.abs()

    @staticmethod
    def _widen(tensor: torch.Tensor) -> torch.Tensor:
        wide = torch.float64 if tensor.dtype in (torch.float64, torch.complex128) else torch.float32
        return (torch.view_as_real(tensor) if tensor.is_complex() else tensor).to(wide)

    def _compare_tensor(self, output: torch.Tensor, where: str) -> str | None:
        expected = self.expected
        if output.shape != expected.shape:
            return f"{where} has size {list(output.shape)}, the reference {list(expected.shape)}"
        if output.dtype != expected.dtype:
            return f"{where} has dtype {output.dtype}, the reference {expected.dtype}"
        if output.device != expected.device:
            return f"{where} is on {output.device}, the reference on {expected.device}"
        prepared = self._wide
        if prepared is None:
            wrong = int((output != expected).sum())
            return None if wrong == 0 else f"{where} differs in {wrong} of {expected.numel()} values"
        if isinstance(prepared, str):
            return prepared.format(where=where)
        want, mask, scale, allowed = prepared
        got = self._widen(output)
        nan = int(torch.isnan(got).sum())
        if nan:
            return f"{where} has {nan} NaN of {got.numel()} values"
        if mask is None:
            alike = bool(torch.isfinite(got).all())
        else:
            alike = torch.equal(torch.isfinite(got), mask) and torch.equal(got[~mask], want[~mask])
            got, want = got[mask], want[mask]
        if not alike:
            return f"{where} has infinities where the reference has none, or the other way round"
        error = (got - want).abs()
        count = int((error > allowed).sum())
        if count == 0:
            return None
        worst = int(torch.argmax(error - allowed))
        return (
            f"{where} differs from the reference in {count} of {want.numel()} values beyond {self.tolerance}: "
            f"worst got {float(got.flatten()[worst]):.6g}, expected {float(want.flatten()[worst]):.6g} "
            f"(rms {scale:.3g})"
        )


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"

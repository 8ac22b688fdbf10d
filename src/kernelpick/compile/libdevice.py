"""NumPy versions of CUDA's libdevice functions, for kernels run in Triton's interpreter (which has none)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Array = Any  # a NumPy array; NumPy's own types would make every lambda below need a cast


def _each(function: Callable[..., float], at_pole: float = math.nan) -> Callable[..., Array]:
    """`function` of Python's `math` (NumPy lacks it) applied to each element (of each argument); `at_pole`
    where it raises."""

    def safe(*values: float) -> float:
        try:
            return function(*values)
        except (ValueError, OverflowError):
            return at_pole

    def apply(x: Array, *others: Array) -> Array:
        return np.vectorize(safe, otypes=[np.float64])(x, *others).astype(x.dtype)

    return apply


def _round_half_away(x: Array) -> Array:
    # C's round(): halves go away from zero (NumPy's rint goes to even). x - trunc(x) is exact.
    truncated = np.trunc(x)
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.sign(x), truncated)


_erf, _erfc = _each(math.erf), _each(math.erfc)

#: By libdevice name, without the `__nv_` prefix, the type suffix (`f` for fp32, `d` in `isnand`) and
#: the `_rn` rounding (what NumPy does); other roundings (`_rz`, `_rd`, `_ru`) are not implemented.
FUNCTIONS: dict[str, Callable[..., Array]] = {
    **{  # NumPy's of the same name
        name: getattr(np, name)
        for name in (
            "abs cbrt ceil floor trunc rint cos sin tan cosh sinh tanh exp exp2 expm1 log log2 log10 log1p "
            "sqrt copysign fmod hypot nextafter signbit isnan isinf isfinite"
        ).split()
    },
    **{name: getattr(np, "arc" + name[1:]) for name in "acos acosh asin asinh atan atanh atan2".split()},
    "fabs": np.abs,
    "llabs": np.abs,
    "rcbrt": lambda x: 1 / np.cbrt(x),
    "nearbyint": np.rint,
    "round": _round_half_away,
    "cospi": lambda x: np.cos(x.dtype.type(math.pi) * x),
    "sinpi": lambda x: np.sin(x.dtype.type(math.pi) * x),
    "exp10": lambda x: np.power(x.dtype.type(10), x),
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "erf": _erf,
    "erfc": _erfc,
    "normcdf": lambda x: (0.5 * _erfc(-x / x.dtype.type(math.sqrt(2)))).astype(x.dtype),
    "lgamma": _each(math.lgamma, at_pole=math.inf),
    "pow": np.power,
    "powi": lambda x, n: np.power(x, n.astype(x.dtype)),
    "ldexp": lambda x, n: np.ldexp(x, n).astype(x.dtype),
    "scalbn": lambda x, n: np.ldexp(x, n).astype(x.dtype),
    "fdim": lambda x, y: np.maximum(x - y, x.dtype.type(0)),  # NaN in, NaN out
    "remainder": _each(math.remainder),  # IEEE's; NaN by a zero or of an infinity
    "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "fma": lambda x, y, z: (
        (x.astype(np.float64) * y + z).astype(x.dtype) if x.dtype == np.float32 else x * y + z
    ),
    "saturate": lambda x: np.clip(x, 0, 1),
    "finite": np.isfinite,
    # The correctly rounded arithmetic (`div_rn`, `add_rn`, ...), fp32 (f) and fp64 (d).
    **{f"{kind}add": np.add for kind in "fd"},
    **{f"{kind}sub": np.subtract for kind in "fd"},
    **{f"{kind}mul": np.multiply for kind in "fd"},
    **{f"{kind}div": np.divide for kind in "fd"},
    **{f"{kind}rcp": lambda x: 1 / x for kind in "fd"},
    **{f"{kind}sqrt": np.sqrt for kind in "fd"},
    "frsqrt": lambda x: 1 / np.sqrt(x),
    "fdivide": np.divide,  # libdevice has its fast approximation only (`fast_fdividef`)
}


def name_of(symbol: str) -> str | None:
    """The name in `FUNCTIONS` of a libdevice symbol (`__nv_tanhf` -> `tanh`), or None if it has none.
    A fast approximation (`__nv_fast_cosf`) is the function itself: exact here."""
    name = symbol.removeprefix("__nv_").removeprefix("fast_").removesuffix("_rn")
    if name in FUNCTIONS:
        return name
    if name.endswith(("f", "d")) and name[:-1] in FUNCTIONS:
        return name[:-1]
    return None


def extern_elementwise(symbol: str, arguments: list[Array], result_dtype: np.dtype[Any]) -> Array:
    """The elements of libdevice's `symbol` applied to `arguments` (broadcast already), as `result_dtype`.

    Raises:
        NotImplementedError: `symbol` has no NumPy version here (libdevice's integer and conversion
            functions, its roundings other than to nearest, and a few more such as `erfinv`).
    """
    name = name_of(symbol)
    if name is None:
        raise NotImplementedError(f"libdevice's `{symbol}` has no interpreted version in kernelpick")
    with np.errstate(all="ignore"):  # a GPU gives inf and nan silently
        return np.asarray(FUNCTIONS[name](*arguments)).astype(result_dtype)

"""The `kernelpick analyze FILE.py:KERNEL --arg NAME=SPEC ... [--json]` command, as plain functions."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kernelpick.analysis.kernel_access import KernelAccess, analyze
from kernelpick.compile.unwrap import KERNELS, innermost, unwrap
from kernelpick.errors import AnalysisError

#: Tensor element types by the names a user may write.
TENSOR_DTYPES: dict[str, torch.dtype] = {
    **dict.fromkeys(("f32", "fp32", "float32"), torch.float32),
    **dict.fromkeys(("f16", "fp16", "float16"), torch.float16),
    **dict.fromkeys(("bf16", "bfloat16"), torch.bfloat16),
    **dict.fromkeys(("f64", "fp64", "float64"), torch.float64),
    **dict.fromkeys(("f8e4m3", "fp8e4m3", "float8_e4m3fn"), torch.float8_e4m3fn),
    **dict.fromkeys(("f8e5m2", "fp8e5m2", "float8_e5m2"), torch.float8_e5m2),
    **dict.fromkeys(("f8e4m3fnuz", "fp8e4m3fnuz", "float8_e4m3fnuz"), torch.float8_e4m3fnuz),
    **dict.fromkeys(("f8e5m2fnuz", "fp8e5m2fnuz", "float8_e5m2fnuz"), torch.float8_e5m2fnuz),
    **dict.fromkeys(("i8", "int8"), torch.int8),
    **dict.fromkeys(("i16", "int16"), torch.int16),
    **dict.fromkeys(("i32", "int32"), torch.int32),
    **dict.fromkeys(("i64", "int64"), torch.int64),
    **dict.fromkeys(("u8", "uint8"), torch.uint8),
    **dict.fromkeys(("u16", "uint16"), torch.uint16),
    **dict.fromkeys(("u32", "uint32"), torch.uint32),
    **dict.fromkeys(("u64", "uint64"), torch.uint64),
    **dict.fromkeys(("i1", "bool"), torch.bool),
}

#: A representative value for each scalar type: Triton infers the type from the value, and these
#: avoid its special cases (1 becomes a constant; multiples of 16 get a divisibility hint).
SCALAR_VALUES: dict[str, Any] = {
    **dict.fromkeys(("i32", "int32", "int"), 3),
    **dict.fromkeys(("i64", "int64"), 2**33 + 3),
    **dict.fromkeys(("u64", "uint64"), 2**63 + 3),
    **dict.fromkeys(("f32", "fp32", "float32", "float"), 3.5),
    **dict.fromkeys(("i1", "bool"), True),
}

SPEC_HELP = (
    "a tensor such as f32[1024] or bf16[64,64], a tensor descriptor such as f32[64,64]/[16,16], "
    "a scalar type such as i32, i64 or fp32, or a value such as 64, 0.5, true or none"
)

_TENSOR = re.compile(r"^(?P<dtype>\w+)\[(?P<shape>[^\]]*)\](?:/\[(?P<block>[^\]]*)\])?$")
_INTEGER = re.compile(r"^[+-]?\d+$")


def parse_spec(text: str) -> Any:
    """Turn one SPEC of the command line into a launch argument.

    Args:
        text: `f32[1024]` / `bf16[64,64]` (a meta tensor), `f32[64,64]/[16,16]` (a host
            `TensorDescriptor` with that block shape), `i32` / `i64` / `u64` / `fp32` / `bool`
            (a scalar of that type), or a value: `64`, `0.5`, `true`, `false`, `none`, `'name'`.

    Returns:
        A meta tensor, a `TensorDescriptor`, or a Python scalar.

    Raises:
        AnalysisError: the spec is none of the above; the message lists what is accepted.
    """
    spec = text.strip()
    lowered = spec.lower()
    tensor = _TENSOR.match(spec)
    if tensor:
        return _tensor(spec, tensor.group("dtype"), tensor.group("shape"), tensor.group("block"))
    if lowered in SCALAR_VALUES:
        return SCALAR_VALUES[lowered]
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    if _INTEGER.match(spec):
        return int(spec)
    if len(spec) >= 2 and spec[0] == spec[-1] and spec[0] in "'\"":
        return spec[1:-1]
    try:
        return float(spec)
    except ValueError:
        pass
    if lowered in TENSOR_DTYPES:
        raise AnalysisError(
            f"`{text}` is not a scalar type Triton can take from Python (ints become i32/i64/u64, floats fp32); "
            f"for a tensor write a shape, e.g. `{spec}[1024]`"
        )
    raise AnalysisError(f"cannot read the argument spec `{text}`: expected {SPEC_HELP}")


def _dimensions(text: str, spec: str, what: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise AnalysisError(
            f"the {what} in `{spec}` must be positive integers separated by commas, e.g. f32[64,64]"
        )
    return [int(p) for p in parts]


def _tensor(spec: str, dtype_name: str, shape_text: str, block_text: str | None) -> Any:
    dtype = TENSOR_DTYPES.get(dtype_name.lower())
    if dtype is None:
        raise AnalysisError(
            f"unknown element type `{dtype_name}` in `{spec}`; use one of {', '.join(sorted(TENSOR_DTYPES))}"
        )
    shape = _dimensions(shape_text, spec, "shape")
    tensor = torch.empty(shape, dtype=dtype, device="meta")
    if block_text is None:
        return tensor
    block = _dimensions(block_text, spec, "block shape")
    if len(block) != len(shape):
        raise AnalysisError(
            f"`{spec}`: the block shape needs one size per dimension of the tensor ({len(shape)})"
        )
    from triton.tools.tensor_descriptor import TensorDescriptor

    try:
        return TensorDescriptor.from_tensor(tensor, block)
    except Exception as error:
        raise AnalysisError(f"`{spec}` is not a valid tensor descriptor: {error}") from error


def load_kernel(reference: str) -> Any:
    """Import the kernel named by `path/to/file.py:name` (or `package.module:name`).

    Raises:
        AnalysisError: the reference is malformed, the file or module cannot be imported, or it has
            no Triton kernel by that name.
    """
    where, colon, name = reference.rpartition(":")
    if not colon or not where or not name:
        raise AnalysisError(f"expected FILE.py:KERNEL (e.g. kernels/add.py:add_kernel), got `{reference}`")
    path = Path(where)
    if path.suffix == ".py" or path.exists():
        module = _import_file(path, reference)
    else:
        try:
            module = importlib.import_module(where)
        except Exception as error:
            raise AnalysisError(
                f"cannot import `{where}` ({type(error).__name__}: {error}); give a path to a .py file or an "
                "importable module"
            ) from error
    kernel = getattr(module, name, None)
    if kernel is None:
        available = [k for k, v in vars(module).items() if _is_kernel(v)]
        listed = ", ".join(available) if available else "none"
        raise AnalysisError(f"`{where}` has no `{name}`; the Triton kernels it defines are: {listed}")
    if not _is_kernel(kernel):
        raise AnalysisError(f"`{where}:{name}` is a {type(kernel).__name__}, not a @triton.jit kernel")
    return kernel


def _is_kernel(value: Any) -> bool:
    try:
        return isinstance(innermost(value), KERNELS)
    except AnalysisError:
        return False


def _import_file(path: Path, reference: str) -> Any:
    if not path.is_file():
        raise AnalysisError(f"no such file `{path}` (from `{reference}`)")
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    module_name = f"kernelpick_cli_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise AnalysisError(f"`{path}` cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # Let the file import its neighbours, as it would when run as a script.
    sys.path.insert(0, str(resolved.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        raise AnalysisError(f"importing `{path}` raised {type(error).__name__}: {error}") from error
    finally:
        sys.path.remove(str(resolved.parent))
    return module


def format_access(access: KernelAccess, as_json: bool = False) -> str:
    """Render an analysis: every argument with read / written / both / untouched, and the reason when uncertain.

    Args:
        access: the answer of `analyze`.
        as_json: a JSON object instead of text.
    """
    roles = {name: access.access(name) for name in access.arg_names}
    if as_json:
        return json.dumps(
            {
                "kernel": access.kernel_name,
                "certain": access.certain,
                "reason": access.reason,
                "arguments": roles,
                "mutated": list(access.mutated),
                "read": list(access.read),
            },
            indent=2,
        )
    width = max((len(n) for n in roles), default=0)
    lines = [f"kernel {access.kernel_name}: " + ("exact" if access.certain else "conservative")]
    lines += [f"  {name.ljust(width)}  {role}" for name, role in roles.items()]
    if not access.certain:
        lines.append(f"conservative because: {access.reason}")
    return "\n".join(lines)


def parse_arguments(arg_specs: Sequence[str]) -> dict[str, Any]:
    """Turn `NAME=SPEC` strings into keyword launch arguments.

    Raises:
        AnalysisError: an item has no `=`, a name is given twice, or a spec cannot be read.
    """
    arguments: dict[str, Any] = {}
    for item in arg_specs:
        name, equals, spec = item.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise AnalysisError(f"expected --arg NAME=SPEC, got `{item}`; SPEC is {SPEC_HELP}")
        if name in arguments:
            raise AnalysisError(f"argument `{name}` is given twice")
        try:
            arguments[name] = parse_spec(spec)
        except AnalysisError as error:
            raise AnalysisError(f"--arg {name}: {error}") from None
    return arguments


def run_analyze(file_kernel: str, arg_specs: Sequence[str], as_json: bool = False) -> str:
    """Everything `kernelpick analyze FILE.py:KERNEL --arg NAME=SPEC ... [--json]` does, returning the text to print.

    Args:
        file_kernel: `path/to/file.py:kernel_name` (or `package.module:kernel_name`).
        arg_specs: the `--arg` values, each `NAME=SPEC`.
        as_json: print JSON instead of a table.

    Raises:
        AnalysisError: a bad reference, a bad spec, a missing or unknown argument; the message says
            what to write instead.
    """
    kernel = load_kernel(file_kernel)
    arguments = parse_arguments(arg_specs)
    _check_complete(kernel, arguments)
    return format_access(analyze(kernel, **arguments), as_json=as_json)


def _check_complete(kernel: Any, arguments: dict[str, Any]) -> None:
    """Name every argument the command line left out, with how to give it."""
    completed = unwrap(kernel, (), arguments)
    bottom = completed.kernel
    signature = getattr(bottom, "signature", None)
    defaults = (
        {p.name for p in signature.parameters.values() if p.default is not p.empty}
        if signature is not None
        else set()
    )
    names = list(getattr(bottom, "arg_names", []))
    missing = [n for n in names if n not in completed.kwargs and n not in defaults]
    if missing and not completed.problem:
        raise AnalysisError(
            f"kernel `{bottom.__name__}` takes {len(names)} arguments, got {len(names) - len(missing)}: missing "
            f"{', '.join(f'`{m}`' for m in missing)}; give each as --arg NAME=SPEC, where SPEC is {SPEC_HELP}"
        )

"""Every public feature of kernelpick, run with TRITON_INTERPRET=1 set: `tests/test_interpret.py` runs this
script in a subprocess (the variable acts when kernels are decorated) and reads the features it printed."""

from __future__ import annotations

import json
import os
import sys

import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import settings

assert os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def double(x):
    return x * 2


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, double(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


@triton.jit
def checked_load(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    return tl.load(x_ptr + tl.arange(0, BLOCK))


@triton.jit
def copy_checked(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), checked_load(x_ptr, BLOCK))


SPACE = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})]
tuned = kernelpick.autotune(SPACE, key=["n"])(double_kernel)
isolated = kernelpick.autotune(SPACE, key=["n"], isolate=True)(double_kernel)


@kernelpick.op("interpret_env::double")
def double_op(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def bind_double(t: torch.Tensor):  # type: ignore[no-untyped-def]
    out = torch.empty_like(t)
    return (t, out, t.numel()), out


def grid(n: int):  # type: ignore[no-untyped-def]
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def main() -> None:
    assert type(double_kernel).__name__ == "InterpretedFunction"
    x = torch.randn(100)
    done = []

    access = kernelpick.analyze(double_kernel, x, x, 100, BLOCK=64)
    assert access.certain and access.mutated == ("out_ptr",), access
    error = kernelpick.analyze(copy_checked, x, x, BLOCK=8)  # Triton's message, not the call site's "^"
    assert error.reason.startswith(
        "Triton could not generate TTIR: BLOCK must be a multiple of 16 (at `tl."
    ), error
    done.append("analyze")

    out = torch.empty(100)
    tuned[grid(100)](x, out, 100)
    torch.testing.assert_close(out, 2 * x)
    assert len(tuned.last_tuning.results) == 2 and all(r.ok for r in tuned.last_tuning.results.values())
    done.append("autotune")

    out = torch.empty(100)
    isolated[grid(100)](x, out, 100)
    torch.testing.assert_close(out, 2 * x)
    assert all(r.ok for r in isolated.last_tuning.results.values()), isolated.last_tuning.results
    done.append("isolation")

    selector = kernelpick.Selector(
        "interpret_env_double",
        [
            kernelpick.extern(lambda t: t * 2, name="torch"),
            kernelpick.triton_choice(
                double_kernel,
                configs=SPACE,
                grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                bind=bind_double,
            ),
        ],
    )
    torch.testing.assert_close(selector(x), 2 * x)
    assert all(r.result.ok for r in selector.last_selection.candidates), selector.last_selection.results
    a, b = torch.randn(32, 48), torch.randn(48, 16)
    torch.testing.assert_close(kernelpick.ops.mm(a, b), a @ b)
    done.append("select")

    try:
        unregistered = torch.ops.interpret_env.double
    except AttributeError as error:
        assert "not registered yet" in str(error), error
    else:
        raise AssertionError(f"torch.ops of an unregistered op gave {unregistered}")
    torch.testing.assert_close(double_op(x), 2 * x)
    assert double_op.mutates_args == ()
    torch.testing.assert_close(torch.ops.interpret_env.double(x), 2 * x)
    compiled = torch.compile(lambda t: double_op(t) + 1, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), 2 * x + 1)
    done.append("op")

    out = torch.empty(100)
    kernelpick.launch(double_kernel, (2,), x, out, 100, BLOCK=64)
    torch.testing.assert_close(out, 2 * x)
    written = kernelpick.functional(double_kernel)[(2,)](x, out, 100, BLOCK=64)
    assert sorted(written) == ["out_ptr"]
    traced = torch.compile(
        lambda t, o: kernelpick.launch(double_kernel, (2,), t, o, 100, BLOCK=64), backend="aot_eager"
    )
    out = torch.zeros(100)
    traced(x, out)
    torch.testing.assert_close(out, 2 * x)
    done.append("launch")

    from kernelpick.cli import main as cli

    assert cli(["report", "--json"]) == 0
    done.append("report")
    print(json.dumps(done))


if __name__ == "__main__":
    with settings.override(print_tables=False):
        main()
    sys.exit(0)

"""Kernels decorated under TRITON_INTERPRET=1 compile as their twins, helpers found through a scope or a module."""

from __future__ import annotations

import sys
import types

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from kernelpick.analysis import analyze
from kernelpick.compile.twins import compilable, compiling


def triple(x):  # type: ignore[no-untyped-def]
    return x * 3


TRIPLE = triple


def triple_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, triple(tl.load(x_ptr + offsets)))


def test_a_helper_in_the_kernel_s_scope_is_compiled_as_its_twin() -> None:
    helper = InterpretedFunction(TRIPLE)
    globals()["triple"] = helper  # as `@triton.jit def triple` makes it under TRITON_INTERPRET=1
    try:
        kernel = InterpretedFunction(triple_kernel)
        x = torch.zeros(16)
        access = analyze(kernel, x, x, BLOCK=16)
        assert access.certain and access.mutated == ("out_ptr",) and access.read == ("x_ptr",)
        assert compilable(kernel).get_capture_scope()["triple"] is compilable(helper)
    finally:
        globals()["triple"] = TRIPLE


def test_interpreted_functions_of_modules_are_swapped_while_lowering_only() -> None:
    module = types.ModuleType("kp_test_interpreted_helpers")
    helper = InterpretedFunction(TRIPLE)
    module.triple = helper  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    globals()["helpers"] = module
    try:
        twin = compilable(InterpretedFunction(triple_kernel))
        with compiling(twin):
            assert module.triple is compilable(helper)
        assert module.triple is helper
        with compiling(triton.jit(triple_kernel)):  # not a twin: nothing is swapped
            assert module.triple is helper
    finally:
        del sys.modules[module.__name__], globals()["helpers"]

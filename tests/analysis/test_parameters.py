"""Mapping TTIR parameters back to kernel arguments."""

from __future__ import annotations

from access_corpus import copy, descriptor, f32, host_descriptors, scalars_and_none, tuple_argument

from kernelpick.analysis.parameters import ttir_parameter_names
from kernelpick.compile.target import specialize


def test_constexprs_are_dropped() -> None:
    assert ttir_parameter_names(specialize(copy, (f32(), f32(), 8), {"BLOCK": 16})) == ["x_ptr", "y_ptr", "n"]


def test_value_one_and_none_become_constants() -> None:
    names = ttir_parameter_names(specialize(copy, (f32(), f32(), 1), {"BLOCK": 16}))
    assert names == ["x_ptr", "y_ptr"]
    names = ttir_parameter_names(specialize(scalars_and_none, (f32(), f32(), 2.0, None, True), {"BLOCK": 16}))
    assert names == ["x_ptr", "y_ptr", "alpha", "flag"]


def test_host_descriptor_expands_to_descriptor_shape_and_strides() -> None:
    names = ttir_parameter_names(specialize(host_descriptors, (descriptor(), descriptor()), {}))
    assert names == ["a_desc"] * 5 + ["b_desc"] * 5


def test_tuple_argument_expands_to_its_elements() -> None:
    assert ttir_parameter_names(specialize(tuple_argument, ((f32(), f32()), 5), {})) == ["pair", "pair", "n"]

"""Selection: the fastest correct implementation of an operation, per input signature."""

from __future__ import annotations

from kernelpick.bench.inputs import Example
from kernelpick.engine.choice import Choice, extern
from kernelpick.engine.modules import load_module, write_module
from kernelpick.engine.record import SelectionRecord
from kernelpick.engine.triton_choice import triton_choice
from kernelpick.select.processing import processed
from kernelpick.select.render import Epilogue
from kernelpick.select.selector import Selector
from kernelpick.select.template import TritonTemplate
from kernelpick.select.template_choice import template

__all__ = [
    "Choice",
    "Epilogue",
    "Example",
    "SelectionRecord",
    "Selector",
    "TritonTemplate",
    "extern",
    "load_module",
    "processed",
    "template",
    "triton_choice",
    "write_module",
]

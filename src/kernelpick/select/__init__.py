"""Selection: the fastest correct implementation of an operation, per input signature."""

from __future__ import annotations

from kernelpick.bench.inputs import Example
from kernelpick.bench.verify import Tolerance, tolerance_for
from kernelpick.select.choice import Choice, ChoiceSpace, ExternChoice, extern
from kernelpick.select.modules import load_module, write_module
from kernelpick.select.processing import ProcessedChoice, ProcessedChoices, processed
from kernelpick.select.record import CandidateResult, ChoiceResult, SelectionRecord, TuningRecord
from kernelpick.select.render import Epilogue, PartialRender
from kernelpick.select.selector import Selector
from kernelpick.select.signature import Signature
from kernelpick.select.template import GridContext, RenderedKernel, TritonTemplate
from kernelpick.select.template_choice import TemplateChoice, TemplateChoices, template
from kernelpick.select.triton_choice import TritonKernelChoice, TritonKernelChoices, triton_choice
from kernelpick.tensors import TensorSpec

__all__ = [
    "CandidateResult",
    "Choice",
    "ChoiceResult",
    "ChoiceSpace",
    "Epilogue",
    "Example",
    "ExternChoice",
    "GridContext",
    "PartialRender",
    "ProcessedChoice",
    "ProcessedChoices",
    "RenderedKernel",
    "SelectionRecord",
    "Selector",
    "Signature",
    "TemplateChoice",
    "TemplateChoices",
    "TensorSpec",
    "Tolerance",
    "TritonKernelChoice",
    "TritonKernelChoices",
    "TritonTemplate",
    "TuningRecord",
    "extern",
    "load_module",
    "processed",
    "template",
    "tolerance_for",
    "triton_choice",
    "write_module",
]

"""Selection: the fastest correct implementation of an operation, per input signature."""

from __future__ import annotations

from kernelpick.bench.inputs import Example
from kernelpick.bench.verify import Tolerance, tolerance_for
from kernelpick.engine.choice import Choice, ChoiceSpace, ExternChoice, extern
from kernelpick.engine.modules import load_module, write_module
from kernelpick.engine.record import CandidateResult, ChoiceResult, SelectionRecord, TuningRecord
from kernelpick.engine.signature import Signature
from kernelpick.engine.triton_choice import TritonKernelChoice, TritonKernelChoices, triton_choice
from kernelpick.select.processing import ProcessedChoice, ProcessedChoices, processed
from kernelpick.select.render import Epilogue, PartialRender
from kernelpick.select.selector import Selector
from kernelpick.select.template import GridContext, RenderedKernel, TritonTemplate
from kernelpick.select.template_choice import TemplateChoice, TemplateChoices, template
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

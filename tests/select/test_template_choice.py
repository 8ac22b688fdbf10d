"""Tests of template choices: rendered per config and signature, cached on disk, run in the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.select.workspace_templates import two_pass_template

from kernelpick import Config, Epilogue, Selector, TritonTemplate, extern, settings, template
from kernelpick.bench.inputs import Example, new_values
from kernelpick.compile.precompile import CompileJob, compile_each
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError
from kernelpick.select.template_choice import TemplateChoice

SOURCE = """
{{ def_kernel() }}
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < {{ size("X", 0) }}
    acc = tl.load(X + offsets * {{ stride("X", 0) }}, mask=mask).to(tl.float32) * FACTOR
    {{ store_output(("offsets",), "acc", "mask") }}
"""
SCALE = TritonTemplate(
    "scale",
    SOURCE,
    inputs=("X",),
    output=lambda x: (x.size, x.dtype),
    grid=lambda context: (-(-context.output.size[0] // context.meta["BLOCK"]),),
)
CONFIGS = [Config({"BLOCK": 16}), Config({"BLOCK": 64}, num_warps=2)]


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_template_renders_per_config_and_runs_in_the_interpreter() -> None:
    selector = Selector(
        "scale", [extern(double), template(SCALE, configs=CONFIGS, constants={"FACTOR": 2.0})]
    )
    x = torch.randn(100)[::2]  # strided: the stride is baked into the kernel
    assert torch.equal(selector(x), x * 2)
    record = selector.last_selection
    assert record is not None
    names = sorted(r.name for r in record.candidates)
    assert names == [
        "double",
        "scale BLOCK=16, num_warps=4, num_stages=3",
        "scale BLOCK=64, num_warps=2, num_stages=3",
    ]
    assert all(r.result.ok for r in record.candidates)
    described = record["scale BLOCK=16, num_warps=4, num_stages=3"].description
    assert described["kind"] == "template" and described["template"] == "scale"
    rendered = settings.cache_dir() / "templates"
    files = sorted(p.name for p in rendered.iterdir())
    assert len(files) == 2 and all(f.endswith(".py") for f in files)
    assert described["source_sha256"][:40] in {Path(f).stem for f in files}


def test_the_template_choice_itself_is_called_after_winning() -> None:
    selector = Selector("scale", [template(SCALE, configs=CONFIGS[:1], constants={"FACTOR": 3.0})])
    x = torch.randn(40)
    assert torch.equal(selector(x), x * 3)
    call = selector.implementation(x)
    assert call.__code__.co_filename.startswith("<kernelpick caller of scale_")
    assert torch.equal(call(x), x * 3)


def test_an_epilogue_reads_more_inputs_named_by_arguments() -> None:
    def reference(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + shift)

    epilogue = Epilogue("acc + shift", ("shift",)).then("tl.maximum(acc, 0.0)")
    choice = template(
        SCALE, configs=CONFIGS[:1], epilogue=epilogue, arguments=("X", "shift"), constants={"FACTOR": 2.0}
    )
    selector = Selector("scale_shift", [extern(reference), choice])
    x, shift = torch.randn(50), torch.randn(1)  # the one-element shift broadcasts
    selector.tune(x, shift)
    record = selector.last_selection
    assert record is not None and all(r.result.ok for r in record.candidates), record.results
    assert record.candidates[1].name.startswith("scale[")


#: Copies X (R x C) into each of an output's two leading slices, reading X by its own strides.
TILE = TritonTemplate(
    "tile",
    """
{{ def_kernel() }}
    pid = tl.program_id(0)
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(X + r * {{ stride("X", 0) }} + c * {{ stride("X", 1) }}).to(tl.float32)
    {{ store_output(("pid", "r", "c"), "x", None) }}
""",
    inputs=("X",),
    output=lambda x: ((2, *x.size), x.dtype),
    grid=lambda context: (2,),
)


def test_an_epilogue_reads_an_input_of_the_template_by_the_outputs_dimensions() -> None:
    # X (4 x 8) read by the template by its own dimensions, and by the epilogue broadcast to the
    # output (2 x 4 x 8): its stride along the output's dimension 1 is 8, along X's own dimension 1
    # it is 1. Passed as arguments, the two must not share a name.
    def reference(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).expand(2, *x.shape).contiguous()

    epilogue = Epilogue("acc + X", ("X",))
    choice = template(TILE, configs=[Config({"R": 4, "C": 8})], epilogue=epilogue, static_shapes=False)
    selector = Selector("tile", [extern(reference), choice])
    selector.tune(torch.randn(4, 8))
    record = selector.last_selection
    assert record is not None and all(r.result.ok for r in record.candidates), record.results


def test_shapes_passed_as_arguments_reuse_one_rendered_kernel_across_sizes() -> None:
    static = template(SCALE, configs=CONFIGS[:1], constants={"FACTOR": 2.0})
    dynamic = template(SCALE, configs=CONFIGS[:1], constants={"FACTOR": 2.0}, static_shapes=False)
    small, large = (Signature.of((torch.empty(n),), {}) for n in (10, 1000))
    assert static.choices_for(small)[0].digest != static.choices_for(large)[0].digest
    assert dynamic.choices_for(small)[0].digest == dynamic.choices_for(large)[0].digest
    selector = Selector("scale", [extern(double), dynamic])
    for n in (10, 1000):
        x = torch.randn(n)
        assert torch.equal(selector(x), x * 2)
    assert len(list((settings.cache_dir() / "templates").iterdir())) == 1


def test_out_is_written_by_the_kernel() -> None:
    def double_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return torch.mul(x, 2, out=out)

    selector = Selector(
        "scale",
        [extern(double, out=double_out), template(SCALE, configs=CONFIGS[:1], constants={"FACTOR": 2.0})],
    )
    x = torch.randn(30)
    out = torch.empty(60)[::2]  # a strided output: its stride is rendered into the store
    assert selector(x, out=out) is out
    assert torch.equal(out, x * 2)
    record = selector.last_selection
    assert record is not None and all(r.result.ok for r in record.candidates)


def test_a_config_that_fails_to_render_is_recorded_as_a_compile_error() -> None:
    source = SOURCE.replace("* FACTOR", "* {{ 2.0 / (BLOCK - 16) }}")  # a division by zero for BLOCK=16
    broken = TritonTemplate("broken", source, inputs=("X",), output=SCALE.output_rule, grid=SCALE.grid_rule)
    selector = Selector("scale", [extern(double), template(broken, configs=CONFIGS)])
    x = torch.randn(20)
    selector.tune(x)
    record = selector.last_selection
    assert record is not None
    failed = record["broken BLOCK=16, num_warps=4, num_stages=3"].result
    assert failed.status == "compile_error" and "ZeroDivisionError" in failed.message
    assert record["broken BLOCK=64, num_warps=2, num_stages=3"].result.status == "wrong_result"  # 2/48, not 2


def test_a_compile_error_in_the_rendered_kernel_is_data() -> None:
    source = SOURCE.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK + 1)")  # not a power of 2
    broken = TritonTemplate("odd", source, inputs=("X",), output=SCALE.output_rule, grid=SCALE.grid_rule)
    selector = Selector(
        "scale", [extern(double), template(broken, configs=CONFIGS[:1], constants={"FACTOR": 2.0})]
    )
    selector.tune(torch.randn(20))
    record = selector.last_selection
    assert record is not None and record.best == "double"
    assert record.candidates[1].result.status == "compile_error"


def test_template_arguments_must_name_the_templates_inputs() -> None:
    with pytest.raises(
        ConfigError, match=r"reads inputs \['X'\], which are not among the operation's arguments"
    ):
        template(SCALE, configs=CONFIGS, arguments=("Y",))
    with pytest.raises(ConfigError, match=r"expects a kernelpick\.TritonTemplate"):
        template("scale", configs=CONFIGS)  # type: ignore[arg-type]


def test_choices_are_template_choices_with_stable_digests() -> None:
    space = template(SCALE, configs=CONFIGS, constants={"FACTOR": 2.0})
    signature = Signature.of((torch.empty(8),), {})
    first = space.choices_for(signature)
    again = space.choices_for(signature)
    assert all(isinstance(c, TemplateChoice) for c in first)
    assert [c.digest for c in first] == [c.digest for c in again]
    assert first[0].digest != first[1].digest


def test_compiling_sees_the_callers_scoped_settings(tmp_path: Path) -> None:
    from kernelpick.compile.precompile import CompileOutcome

    seen: list[object] = []

    class Probe:
        """A choice of our own (the protocol is open) that records the settings compiling it sees."""

        def __init__(self, name: str) -> None:
            self.name = self.digest = name

        def choices_for(self, signature: Signature) -> list[Probe]:
            return [self]

        def description(self) -> dict[str, str]:
            return {"kind": "probe", "name": self.name}

        def compile_job(self, example: object, signature: Signature) -> CompileOutcome:
            seen.append(settings.current().cache_dir)
            return CompileOutcome("ok")

        def callable_for(self, signature: Signature) -> object:
            return double

    scoped = tmp_path / "scoped-cache"
    with settings.override(cache_dir=scoped, compile_workers=2):
        Selector("scale", [Probe("one"), Probe("two"), Probe("three")]).tune(torch.randn(20))
    assert seen == [scoped] * 3


def test_a_template_with_a_workspace_and_two_kernels_runs_both_and_compiles_both() -> None:
    space = template(two_pass_template(), configs=[Config({"BLOCK": 16})], constants={"FACTOR": 2.0})
    selector = Selector("row_sum", [extern(lambda x: (x * 2).sum(0), name="torch"), space])
    x = torch.randn(3, 10)
    record = selector.tune(x)  # the template's output is verified against the reference's
    assert all(r.result.ok for r in record.candidates), record.summary()
    (choice,) = space.choices_for(Signature.of((x,), {}))
    assert isinstance(choice, TemplateChoice)
    torch.testing.assert_close(choice.callable_for(Signature.of((x,), {}))(x), (x * 2).sum(0))
    job = choice.compile_job(Example(*new_values((x,), {})), Signature.of((x,), {}))
    assert isinstance(job, CompileJob)
    assert [c.kernel.fn.__name__ for c in job.companions] == [f"{choice.rendered.kernel_name}_total"]
    assert (job.companions[0].config.num_warps, job.companions[0].grid) == (2, (1,))


def test_compiling_binds_the_callers_own_inputs_and_stand_ins_for_the_output_and_workspace() -> None:
    # Compiling needs kinds, dtypes and alignment: compiling every choice of a large product at once
    # must not allocate an output (and scratch space) per choice.
    space = template(two_pass_template(), configs=[Config({"BLOCK": 16})], constants={"FACTOR": 2.0})
    x = torch.randn(3, 10)
    signature = Signature.of((x,), {})
    (choice,) = space.choices_for(signature)
    job = choice.compile_job(Example((x,), {}, written=()), signature)
    assert isinstance(job, CompileJob)
    tensors = [a for a in job.args if isinstance(a, torch.Tensor)]
    assert tensors[0] is x  # the input as given, not a copy
    assert [t.device.type for t in tensors[1:]] == ["meta", "meta"]  # output and workspace
    assert [t.dtype for t in tensors[1:]] == [torch.float32, torch.float32]
    (outcome,) = compile_each([lambda: job], interpreter=True, workers=1)
    assert outcome.ok, outcome.message
    out = torch.empty(10)
    torch.testing.assert_close(
        choice.callable_for(Signature.of((x,), {"out": out}))(x, out=out), (x * 2).sum(0)
    )

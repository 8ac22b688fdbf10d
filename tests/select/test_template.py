"""Tests of TritonTemplate rendering: static and passed shapes, hooks, epilogues, errors."""

from __future__ import annotations

import pytest
import torch
from tests.select.workspace_templates import TWO_PASS_SOURCE, two_pass_template

from kernelpick.config import Config
from kernelpick.errors import TemplateError
from kernelpick.select.render import Epilogue
from kernelpick.select.template import TritonTemplate, _compiled
from kernelpick.tensors import TensorSpec

SCALE_SOURCE = """
{{ def_kernel() }}
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < {{ size("X", 0) }}
    acc = tl.load(X + offsets * {{ stride("X", 0) }}, mask=mask).to(tl.float32) * FACTOR
    {{ store_output(("offsets",), "acc", "mask") }}
"""


def scale_template(source: str = SCALE_SOURCE) -> TritonTemplate:
    return TritonTemplate(
        "scale",
        source,
        inputs=("X",),
        output=lambda x: (x.size, x.dtype),
        grid=lambda context: (-(-context.output.size[0] // context.meta["BLOCK"]),),
    )


def specs(**tensors: torch.Tensor) -> dict[str, TensorSpec]:
    return {name: TensorSpec.of(t) for name, t in tensors.items()}


def test_static_render_bakes_sizes_strides_and_meta_parameters_in() -> None:
    rendered = scale_template().prepare(
        Config({"BLOCK": 16}), specs(X=torch.empty(40)), constants={"FACTOR": 2.0}
    )
    assert "BLOCK: tl.constexpr = 16" in rendered.source
    assert "FACTOR: tl.constexpr = 2.0" in rendered.source
    assert "mask = offsets < 40" in rendered.source
    assert "(X, OUT):" in rendered.source  # no size or stride parameters
    assert rendered.grid == (3,)
    assert [p.kind for p in rendered.parameters] == ["tensor", "output"]


def test_dynamic_render_passes_sizes_and_strides_so_one_source_serves_many_sizes() -> None:
    template = scale_template()
    small = template.prepare(
        Config({"BLOCK": 16}), specs(X=torch.empty(40)), constants={"FACTOR": 2.0}, static_shapes=False
    )
    large = template.prepare(
        Config({"BLOCK": 16}), specs(X=torch.empty(400)), constants={"FACTOR": 2.0}, static_shapes=False
    )
    assert small.source == large.source
    assert "(X, OUT, X_size_0, X_stride_0, OUT_stride_0):" in small.source
    assert [p.value for p in large.parameters if p.kind == "int"] == [400, 1, 1]
    assert large.grid == (25,)


def test_the_kernel_signature_hook_includes_the_inputs_the_epilogue_read() -> None:
    epilogue = Epilogue("acc + shift", ("shift",))
    rendered = scale_template().prepare(
        Config({"BLOCK": 16}),
        specs(X=torch.empty(40), shift=torch.empty(1)),
        epilogue,
        constants={"FACTOR": 1.0},
    )
    assert "(X, shift, OUT):" in rendered.source
    # a one-element input broadcasts: stride 0, so its offset vanishes
    assert (
        "epilogue_shift = tl.load(shift + 0 * (offsets), mask=mask, other=0.0).to(tl.float32)"
        in rendered.source
    )
    assert "epilogue_result = acc + epilogue_shift" in rendered.source
    # the epilogue code is indented like the store_output call site
    assert (
        "\n    tl.store(OUT + (offsets), (epilogue_result).to(OUT.dtype.element_ty), mask=mask)"
        in rendered.source
    )


def test_render_returns_the_source_text() -> None:
    text = scale_template().render(Config({"BLOCK": 16}), specs(X=torch.empty(8)), constants={"FACTOR": 1.0})
    assert text.startswith("# Rendered by kernelpick from template `scale`")
    compile(text, "<rendered>", "exec")


def test_a_missing_meta_parameter_names_the_template_and_config() -> None:
    source = SCALE_SOURCE.replace("* FACTOR", "* {{ FACTOR * 2 }}")
    with pytest.raises(TemplateError, match=r"template `scale` failed to render for config BLOCK=16.*FACTOR"):
        scale_template(source).prepare(Config({"BLOCK": 16}), specs(X=torch.empty(8)))


def test_an_epilogue_without_store_output_is_refused() -> None:
    source = "{{ def_kernel() }}\n    pass\n"
    with pytest.raises(TemplateError, match="never calls store_output"):
        scale_template(source).prepare(
            Config({}), specs(X=torch.empty(8), s=torch.empty(8)), Epilogue("acc + s", ("s",))
        )


def test_missing_input_specs_are_named() -> None:
    with pytest.raises(TemplateError, match=r"needs specs for \['X'\]"):
        scale_template().prepare(Config({"BLOCK": 16}), {})


def test_a_template_received_by_value_again_and_again_is_compiled_once_a_process() -> None:
    # A worker receives each candidate's template anew, pickled by value.
    import cloudpickle

    template = scale_template()
    copies = [cloudpickle.loads(cloudpickle.dumps(template)) for _ in range(3)]
    assert all(_compiled(copy.source) is _compiled(template.source) for copy in copies)
    render = (Config({"BLOCK": 16}), specs(X=torch.empty(8)))
    assert copies[-1].render(*render, constants={"FACTOR": 1.0}) == template.render(
        *render, constants={"FACTOR": 1.0}
    )


def test_invalid_jinja_is_reported_at_construction() -> None:
    with pytest.raises(TemplateError, match="not valid Jinja2"):
        scale_template("{{ def_kernel( }}")


def test_tensor_descriptors_need_aligned_contiguous_rows() -> None:
    source = "{{ tensor_descriptor('X', ['BLOCK', 'BLOCK']) }}\n{{ def_kernel() }}\n    pass\n"
    template = TritonTemplate(
        "d", source, inputs=("X",), output=lambda x: (x.size, x.dtype), grid=lambda c: (1,)
    )
    good = template.prepare(Config({"BLOCK": 16}), specs(X=torch.empty(32, 32)))
    descriptor = next(p for p in good.parameters if p.kind == "descriptor")
    assert (descriptor.shape, descriptor.strides, descriptor.block) == ((32, 32), (32, 1), (16, 16))
    with pytest.raises(TemplateError, match="tensor descriptor"):
        template.prepare(Config({"BLOCK": 16}), specs(X=torch.empty(32, 32).t()))
    with pytest.raises(TemplateError, match="tensor descriptor"):
        template.prepare(Config({"BLOCK": 16}), specs(X=torch.empty(32, 33)[:, :32]))


def test_a_workspace_and_a_later_kernel_are_parameters_and_launches_of_the_render() -> None:
    rendered = two_pass_template().prepare(
        Config({"BLOCK": 16}, num_warps=4), specs(X=torch.empty(3, 10)), constants={"FACTOR": 2.0}
    )
    name = rendered.kernel_name
    # both kernels take every parameter: one argument list serves every launch
    assert f"def {name}(X, OUT, PARTS):" in rendered.source
    assert f"def {name}_total(X, OUT, PARTS):" in rendered.source
    assert [(p.name, p.kind, p.shape) for p in rendered.parameters if p.kind == "workspace"] == [
        ("PARTS", "workspace", (3, 10))
    ]
    assert rendered.grid == (3,)
    assert [(a.kernel_name, a.grid, a.num_warps, a.num_stages) for a in rendered.after] == [
        (f"{name}_total", (1,), 2, 1)
    ]
    # the later kernel's grid is not in the source but is in the digest
    wider = two_pass_template(TWO_PASS_SOURCE.replace("grid=[1]", "grid=[2]")).prepare(
        Config({"BLOCK": 16}), specs(X=torch.empty(3, 10)), constants={"FACTOR": 2.0}
    )
    assert wider.source == rendered.source and wider.digest != rendered.digest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{{ def_kernel() }}", "{{ def_kernel('first', grid=[1]) }}"), "the first def_kernel"),
        (("grid=[1], ", ""), "needs a name .an identifier. and a grid"),
        (('"total"', '"two words"'), "needs a name"),
        (
            ('workspace("PARTS"', 'workspace("X"'),
            "workspace name 'X' must be an identifier that names no input",
        ),
        (('workspace("PARTS"', 'workspace("BLOCK"'), "names no input, output, meta-parameter"),
    ],
)
def test_a_misused_kernel_or_workspace_is_a_template_error(change: tuple[str, str], message: str) -> None:
    template = two_pass_template(TWO_PASS_SOURCE.replace(*change))
    with pytest.raises(TemplateError, match=message):
        template.prepare(Config({"BLOCK": 16}), specs(X=torch.empty(3, 10)), constants={"FACTOR": 2.0})


def test_two_kernels_of_one_name_are_refused() -> None:
    source = TWO_PASS_SOURCE + '\n{{ def_kernel("total", grid=[1]) }}\n    pass\n'
    with pytest.raises(TemplateError, match="defines two kernels named 'total'"):
        two_pass_template(source).prepare(
            Config({"BLOCK": 16}), specs(X=torch.empty(3, 10)), constants={"FACTOR": 2.0}
        )

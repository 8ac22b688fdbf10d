"""A template of two kernels and a workspace, for the tests of templates and template choices."""

from __future__ import annotations

from kernelpick.select.template import TritonTemplate

# Rows of X summed in two launches: each program of the first writes its row, scaled, to a workspace;
# the second kernel adds the rows in order and stores the sum.
TWO_PASS_SOURCE = """
{% set rows = size_hint("X", 0) %}
{% set columns = size_hint("X", 1) %}
{% set ws = workspace("PARTS", [rows, columns]) %}
{{ def_kernel() }}
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < {{ columns }}
    part = tl.load(X + row * {{ stride("X", 0) }} + offsets, mask=mask).to(tl.float32) * FACTOR
    tl.store({{ ws }} + row * {{ columns }} + offsets, part, mask=mask)

{{ def_kernel("total", grid=[1], num_warps=2, num_stages=1) }}
    offsets = tl.arange(0, BLOCK)
    mask = offsets < {{ columns }}
    acc = tl.load({{ ws }} + offsets, mask=mask)
    for row in tl.static_range(1, {{ rows }}):
        acc += tl.load({{ ws }} + row * {{ columns }} + offsets, mask=mask)
    {{ store_output(("offsets",), "acc", "mask") }}
"""


def two_pass_template(source: str = TWO_PASS_SOURCE) -> TritonTemplate:
    return TritonTemplate(
        "row_sum",
        source,
        inputs=("X",),
        output=lambda x: ((x.size[1],), x.dtype),
        grid=lambda context: (context.inputs["X"].size[0],),
    )

"""How many binaries `kernelpick.ops.mm`'s templates compile for the GEMM suite's 36 bf16 shapes
(`x @ W.T`, M from 1 to 8192 by the six Llama-3 (N, K) pairs of bench/gemm_suite.py), with sizes
baked into the templates' source (KERNELPICK_OPS_STATIC_SHAPES=1) and passed as arguments (the default).

No GPU needed: the choices are rendered for an H100's description, as a selection on one renders
them, and a binary is counted once per distinct (source, launch options) pair, which is how Triton's
cache tells compiles apart (its arguments' specialization aside: every size here is a multiple of 16
but M = 1 and 4, and each stride is 1 or such a multiple). A split-K template's reduction kernel is
counted with its main kernel.

Writes bench/results/count_binaries-cpu.json. Run: python bench/count_binaries.py
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, write_result
from gemm_suite import SHAPES

from kernelpick import settings
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.ops import gemm

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 << 20, 132, 232448)


def count(static: bool) -> dict[str, Any]:
    # The selectors read the setting as they are made.
    with gemm.fresh_selectors(), settings.override(ops_static_shapes=static):
        selector = gemm.selector("mm")
        binaries: set[tuple[str, str]] = set()
        by_template: dict[str, set[tuple[str, str]]] = {}
        choices = 0
        for m, n, k in SHAPES:
            a = torch.empty((m, k), dtype=torch.bfloat16, device="meta")
            weight = torch.empty((n, k), dtype=torch.bfloat16, device="meta")
            signature = dataclasses.replace(Signature.of((a, weight.t()), {}), device=H100)
            for space in selector.spaces:
                for choice in space.choices_for(signature):
                    rendered = getattr(choice, "rendered", None)
                    if rendered is None:  # a library function: nothing to compile
                        continue
                    choices += 1
                    binary = (rendered.source, choice.launch_config.identity)
                    binaries.add(binary)
                    by_template.setdefault(space.name, set()).add(binary)
    return {
        "template_choices": choices,
        "binaries": len(binaries),
        "binaries_by_template": {name: len(found) for name, found in by_template.items()},
    }


def main() -> None:
    report = {
        "environment": environment(),
        "shapes": len(SHAPES),
        "device_described": H100.name,
        "sizes_baked_in": count(True),
        "sizes_passed": count(False),
    }
    baked, passed = report["sizes_baked_in"]["binaries"], report["sizes_passed"]["binaries"]
    report["fewer_compiles"] = baked / passed
    print(f"{report['shapes']} shapes: {baked} binaries with sizes baked in, {passed} with sizes passed")
    print(f"wrote {write_result('count_binaries', report)}")


if __name__ == "__main__":
    main()

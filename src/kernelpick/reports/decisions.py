"""A selector's decisions: per tuned key its pick, what that beat, and how near the device's limits."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from kernelpick.console import Column, FittingTable
from kernelpick.device import DeviceInfo
from kernelpick.reports.data import Candidate, TunedKey
from kernelpick.reports.roofline import Roofline
from kernelpick.store.keys import Toolchain, canonical_json
from kernelpick.work import MatrixProduct, matrix_product

__all__ = ["SPEEDUP_NOTE", "Decision", "DecisionGroup", "decision_groups", "print_decisions", "short_name"]

#: What the speedup column compares: said once under the tables.
SPEEDUP_NOTE = (
    "speedup: the time of `vs` over the pick's; `vs` is the fastest library choice (an extern, such as "
    "cuBLAS through torch.mm) where a Triton choice was picked, the fastest Triton choice where a library "
    "choice was, and the runner-up where all are of one kind"
)


@dataclass(frozen=True, slots=True)
class Decision:
    """What one tuned key picked (None: nothing worked, or its tuning was interrupted) and the
    candidate it is compared with (`SPEEDUP_NOTE`; None where there is no other that worked)."""

    tuned: TunedKey
    product: MatrixProduct | None
    pick: Candidate | None
    versus: Candidate | None

    @property
    def speedup(self) -> float | None:
        """The time of `versus` over the pick's: above 1 where the pick is faster."""
        if self.pick is None or self.versus is None:
            return None
        return self.versus.result.cost_ms / self.pick.result.cost_ms

    @property
    def roofline(self) -> Roofline | None:
        """The pick's roofline figures (None: no FLOPs or bytes are known, or nothing was picked)."""
        return None if self.pick is None else self.tuned.roofline(self.pick)

    @property
    def label(self) -> str:
        """The row's first cell: M for a matrix product, else the key's inputs."""
        return str(self.product.m) if self.product is not None else self.tuned.key_text

    @property
    def no_pick(self) -> str:
        """Why there is no pick: every candidate failed, or the tuning stopped before it picked."""
        failed = all(not c.result.ok for c in self.tuned.candidates)
        return "all failed" if failed else "unfinished"

    def to_dict(self) -> dict[str, Any]:
        found = self.roofline
        return {
            "key": self.tuned.key_text,
            "m": None if self.product is None else self.product.m,
            "pick": None if self.pick is None else self.pick.name,
            "pick_ms": None if self.pick is None else self.pick.result.cost_ms,
            "versus": None if self.versus is None else self.versus.name,
            "versus_ms": None if self.versus is None else self.versus.result.cost_ms,
            "speedup": self.speedup,
            "roofline": None if found is None else found.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class DecisionGroup:
    """The decisions of one selector on one device (and toolchain) for keys alike but for M: a
    product's other sizes, dtypes and layouts are `shape` ("N=4096, K=4096, bfloat16, B column-major");
    a selector that is not a product has one group of every key, with no `shape`."""

    kernel: str
    device: str
    capability: str | None
    toolchain: str | None  # described where the kernel was tuned on the device under several
    shape: str
    decisions: tuple[Decision, ...]

    @property
    def rooflines(self) -> list[Roofline]:
        return [found for found in (d.roofline for d in self.decisions) if found is not None]

    @property
    def roofline_with_peaks(self) -> Roofline | None:
        """A roofline of this group's with the device's peaks (None: no figures, or no peaks known)."""
        return next((found for found in self.rooflines if found.peaks is not None), None)

    @property
    def where(self) -> str:
        """The device its keys were tuned on, and the toolchain where it was tuned there under several."""
        label = DeviceInfo.recorded(self.device, self.capability).label
        return label + (f", {self.toolchain}" if self.toolchain else "")

    @property
    def title(self) -> str:
        """The selector and where it was tuned; `shape` says what its keys share."""
        return f"{self.kernel} on {self.where}"

    def columns(self) -> list[Column]:
        """M (or the key), the pick, its time, what it is compared with, and where the device's peaks are
        known its share of each limit, its intensity and the limit that binds. Where the width is short
        the intensity goes first, then the name of what each pick is compared with."""
        products = all(d.product is not None for d in self.decisions)
        columns = [
            Column("M", right=True) if products else Column("key", wrap=True),
            Column("pick", wrap=True),
            Column("ms/call", right=True),
            Column("vs", wrap=True, drop=1),
            Column("vs ms", right=True),
            Column("speedup", right=True),
        ]
        if self.roofline_with_peaks is not None:
            columns += [
                Column("% mem", right=True),
                Column("% compute", right=True),
                Column("FLOP/B", right=True, drop=2),
                Column("bound"),
            ]
        return columns

    def cells(self, decision: Decision) -> list[str]:
        """One decision's row, as `columns` names them ("-" where there is nothing to say)."""
        pick, versus, speedup = decision.pick, decision.versus, decision.speedup
        cells = [
            decision.label,
            decision.no_pick if pick is None else short_name(pick),
            "-" if pick is None else f"{pick.result.cost_ms:.4f}",
            "-" if versus is None else short_name(versus),
            "-" if versus is None else f"{versus.result.cost_ms:.4f}",
            "-" if speedup is None else f"{speedup:.2f}×",
        ]
        if self.roofline_with_peaks is not None:
            found = decision.roofline
            cells += (
                ["-"] * 4
                if found is None
                else [
                    _percent(found.memory_percent),
                    _percent(found.compute_percent),
                    _intensity(found.intensity),
                    found.bound or "-",
                ]
            )
        return cells

    @property
    def caption(self) -> str:
        """The peaks the roofline figures are shares of, or why there are none (nothing for a selector
        whose FLOPs and bytes are unknown)."""
        found = self.roofline_with_peaks
        if found is not None and found.peaks is not None and found.peak_tflops is not None:
            return (
                f"roofline: the {found.peaks.model} datasheet's {found.peaks.memory_gbps:g} GB/s and "
                f"{found.peak_tflops:g} TFLOP/s ({self._compute_dtype()}); ridge point {found.ridge:.0f} FLOP/B"
            )
        if found is not None and found.peaks is not None:
            return (
                f"roofline: the {found.peaks.model} datasheet has no compute peak for {self._compute_dtype()}"
            )
        if self.rooflines:  # FLOPs or bytes known, peaks not
            return f"no roofline: kernelpick knows no datasheet peaks for {self.device}"
        return ""

    def table(self, *, caption: bool = True) -> FittingTable:
        """The decisions, one row per key (by M), fitting the width they are printed at, with the
        `caption` under them unless told not to."""
        table = FittingTable(
            self.columns(),
            title=f"DECISIONS {self.title}" + (f"\n{self.shape}" if self.shape else ""),
            caption=self.caption if caption else "",
        )
        for decision in self.decisions:
            table.add_row(*self.cells(decision))
        return table

    def _compute_dtype(self) -> str:
        first = self.decisions[0].tuned
        dtype = (first.dtype or "?").removeprefix("torch.")
        return "tf32" if dtype == "float32" and first.name.endswith("_tf32") else dtype

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "device": self.device,
            "capability": self.capability,
            "toolchain": self.toolchain,
            "shape": self.shape,
            "decisions": [d.to_dict() for d in self.decisions],
        }


def decision_groups(keys: Iterable[TunedKey]) -> list[DecisionGroup]:
    """The decisions of `keys`, grouped (`DecisionGroup`) by kernel, device, toolchain and a product's
    sizes but M; each group's rows by M, or for other selectors by their keys' numbers."""
    keys = list(keys)
    toolchains: dict[tuple[str, str], set[str]] = {}
    for tuned in keys:
        toolchains.setdefault((tuned.name, tuned.device), set()).add(canonical_json(tuned.toolchain))
    groups: dict[tuple[str, str, str, str], list[Decision]] = {}
    for tuned in keys:
        product = matrix_product(tuned.name, tuned.key) if tuned.kind == "select" else None
        pick = tuned.winner if tuned.best is not None else None
        decision = Decision(tuned, product, pick, _versus(tuned, pick))
        shape = "" if product is None else product_shape(product)
        several = len(toolchains[(tuned.name, tuned.device)]) > 1
        toolchain = _toolchain_text(tuned.toolchain) if several else ""
        groups.setdefault((tuned.name, tuned.device, toolchain, shape), []).append(decision)
    found = []
    for (kernel, device, toolchain, shape), decisions in sorted(groups.items(), key=lambda g: _natural(g[0])):
        decisions.sort(
            key=lambda d: (d.product.m, _natural(d.label)) if d.product else (0, _natural(d.label))
        )
        found.append(
            DecisionGroup(
                kernel,
                device,
                decisions[0].tuned.capability,
                toolchain or None,
                shape,
                tuple(decisions),
            )
        )
    return found


def short_name(candidate: Candidate) -> str:
    """A candidate's name without its config: "triton_mm" for "triton_mm BLOCK_M=16, ..."; a config
    with no name of its own (a tuned kernel's) whole."""
    name = candidate.description.get("name")
    if isinstance(name, str) and "config" in candidate.description:
        return name.split(" ", 1)[0]
    return candidate.name


def _library(candidate: Candidate) -> bool:
    return candidate.description.get("kind") == "extern"


def _versus(tuned: TunedKey, pick: Candidate | None) -> Candidate | None:
    """What `pick` is compared with (`SPEEDUP_NOTE`)."""
    if pick is None:
        return None
    others = [c for c in tuned.ranked() if c.result.ok and c.name != pick.name]
    other_kind = [c for c in others if _library(c) != _library(pick)]
    found = other_kind or others
    return found[0] if found else None


def product_shape(product: MatrixProduct) -> str:
    """What a product's keys share but M: "N=4096, K=4096, bfloat16, B column-major" (batch, bias,
    scales and A's layout where they say something)."""
    parts = [f"N={product.n}", f"K={product.k}"]
    if len(product.a["size"]) == 3:
        parts.append(f"batch {product.batch}")
    dtype = str(product.a["dtype"]).removeprefix("torch.")
    parts.append(dtype if product.out_dtype == dtype else f"{dtype} to {product.out_dtype}")
    a_layout = _layout(product.a)
    if a_layout != "row-major":
        parts.append(f"A {a_layout}")
    parts.append(f"B {_layout(product.b)}")
    others = dict(product.others)
    if "scale_a" in others:
        parts.append("scales per tensor" if _elements(others["scale_a"]) == 1 else "scales per row")
    if "bias" in others:
        bias = others["bias"]
        parts.append(f"bias ({', '.join(_extent(product, bias, i) for i in range(len(bias['size'])))})")
        layout = _layout(bias)
        if layout not in ("row-major", "column-major"):  # a vector or matrix read as it usually is
            parts.append(f"bias {layout}")
    return ", ".join(parts)


def _extent(product: MatrixProduct, tensor: Mapping[str, Any], index: int) -> str:
    """An extent of a bias by the size it is: N for its last, M for one before it, else the number."""
    size = list(tensor["size"])
    extent = int(size[index])
    if index == len(size) - 1 and extent == product.n:
        return "N"
    if index == len(size) - 2 and extent == product.m:
        return "M"
    return str(extent)


def _elements(tensor: Mapping[str, Any]) -> int:
    return math.prod(int(extent) for extent in tensor["size"])


def _layout(tensor: Mapping[str, Any]) -> str:
    """How a tensor's last two dimensions lie in memory: "row-major", "column-major" or its strides;
    then its storage offset and "misaligned" where its data starts off a 16-byte boundary. The same
    for every M, as the group's shape must be."""
    size, stride = list(tensor["size"]), list(tensor.get("stride") or [])
    text = f"stride={stride}".replace(" ", "")
    if not size or (len(size) == 1 and stride in ([1], [0])):
        text = "row-major"
    elif len(size) >= 2 and len(stride) == len(size):
        rows, columns = int(size[-2]), int(size[-1])
        if (columns <= 1 or stride[-1] == 1) and (rows <= 1 or stride[-2] == columns):
            text = "row-major"
        elif (rows <= 1 or stride[-2] == 1) and (columns <= 1 or stride[-1] == rows):
            text = "column-major"
    if tensor.get("offset"):
        text += f" offset={tensor['offset']}"
    if tensor.get("aligned") is False:
        text += " misaligned"
    return text


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _intensity(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _toolchain_text(versions: Mapping[str, Any] | None) -> str:
    if versions is None:
        return "toolchain unknown"
    return Toolchain(str(versions.get("triton")), str(versions.get("torch")), versions.get("cuda")).describe()


def _natural(value: Any) -> tuple[Any, ...]:
    """A sort key that orders the numbers in text by value: "(16, ...)" before "(128, ...)"."""
    text = value if isinstance(value, str) else " ".join(map(str, value))
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text))


def print_decisions(out: Console, groups: Sequence[DecisionGroup]) -> None:
    """Each group's table, then what their speedups compare (nothing at all without groups). A caption
    every group shares (the same device and dtype) is said once, at the end."""
    if not groups:
        return
    captions = list(dict.fromkeys(group.caption for group in groups))
    shared = len(captions) == 1
    for group in groups:
        out.print(group.table(caption=not shared))
        out.print()
    out.print(Text("\n".join(filter(None, [captions[0] if shared else "", SPEEDUP_NOTE]))))

"""The `kernelpick device` command: the facts kernelpick knows of each visible device."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

from rich.markup import escape
from rich.table import Table

from kernelpick.console import console
from kernelpick.device import REGISTERS_PER_BLOCK, DeviceInfo, Requirements, visible_devices
from kernelpick.store.keys import Toolchain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--measure",
        action="store_true",
        help="measure each GPU's DRAM bandwidth again (it is measured once per model and kept otherwise)",
    )


def device_facts(device: DeviceInfo, *, measure: bool = False) -> dict[str, Any]:
    """What kernelpick knows of `device`, as plain data (see `kernelpick device --json`)."""
    facts: dict[str, Any] = {
        "type": device.type,
        "index": device.index,
        "name": device.name,
        "interpreter": device.interpreter,
        "label": device.label,
    }
    if device.interpreter:
        return {**facts, "cpu_cores": os.cpu_count(), "templates": _templates(device)}
    from kernelpick.reports.bandwidth import memory_bandwidth

    shared = device.shared_memory_limit
    peaks = device.peaks
    try:
        measured: float | str = memory_bandwidth(device, again=measure).memory_gbps
    except RuntimeError as error:  # out of memory on a busy GPU, say: the other facts still stand
        measured = f"not measured: {str(error).splitlines()[0]}"
    return {
        **facts,
        "capability": device.capability_text or None,
        "multiprocessors": device.multiprocessors,
        "l2_bytes": device.l2_bytes,
        "shared_memory_per_block": shared,
        "shared_memory_from": "device" if device.shared_memory_per_block else "table by capability",
        "registers_per_block": REGISTERS_PER_BLOCK,
        "big_gpu": device.big_gpu,
        "tma": Requirements(tma=True).unmet(device) is None,
        "datasheet": None if peaks is None else peaks.to_dict(),
        "measured_memory_gbps": measured,
        "templates": _templates(device),
    }


def _templates(device: DeviceInfo) -> dict[str, str | None]:
    """Each built-in template with requirements: None where `device` meets them, else why not."""
    from kernelpick.ops.gemm_templates import GEMM, PERSISTENT_TMA_GEMM

    return {
        template.name: None if template.requires is None else template.requires.unmet(device)
        for template in (GEMM, PERSISTENT_TMA_GEMM)
    }


def run_device(args: argparse.Namespace) -> int:
    devices = visible_devices()
    facts: list[dict[str, Any]] = []
    measured: set[str] = set()  # device models measured again
    for device in devices:
        # With --measure, one GPU of a model measures it; the others read what it kept.
        facts.append(device_facts(device, measure=args.measure and device.name not in measured))
        if not isinstance(facts[-1].get("measured_memory_gbps"), str):
            measured.add(device.name)
    toolchain = Toolchain.current()
    if args.json:
        print(json.dumps({"toolchain": dataclasses.asdict(toolchain), "devices": facts}, indent=2))
        return 0
    out = console()
    out.print(escape(f"kernelpick on {toolchain.describe()}"))
    if devices[0].interpreter:
        out.print(
            f"No CUDA GPU is visible: Triton kernels run in Triton's interpreter on the CPU "
            f"({facts[0]['cpu_cores']} cores), and their timings are not representative of any GPU."
        )
        return 0
    for fact in facts:
        out.print()
        out.print(_table(fact))
    return 0


def _table(fact: dict[str, Any]) -> Table:
    table = Table(title=f"cuda:{fact['index']} {escape(fact['name'])}", title_justify="left", box=None)
    table.add_column("fact")
    table.add_column("value")
    rows = [
        ("compute capability", f"{fact['capability']} (sm_{str(fact['capability']).replace('.', '')})"),
        ("SMs", str(fact["multiprocessors"])),
        ("L2 cache", f"{fact['l2_bytes'] / 2**20:g} MiB"),
        (
            "shared memory per block",
            f"{fact['shared_memory_per_block']:,} bytes ({fact['shared_memory_from']})",
        ),
        ("registers per block", f"{fact['registers_per_block']:,}"),
        ("big GPU (68+ SMs)", "yes" if fact["big_gpu"] else "no"),
        ("TMA tensor descriptors", "yes" if fact["tma"] else "no"),
        ("DRAM, measured (copy)", _gbps(fact["measured_memory_gbps"])),
    ]
    sheet = fact["datasheet"]
    if sheet is None:
        rows.append(("datasheet", "not in kernelpick's table: no peaks for roofline figures"))
    else:
        tflops = ", ".join(
            f"{dtype} {value:g}" for dtype, value in sheet["tflops"].items() if value is not None
        )
        rows += [
            ("datasheet", f"{sheet['model']}: {sheet['source']}"),
            ("  peak dense TFLOP/s", tflops),
            ("  DRAM", _gbps(sheet["memory_gbps"])),
        ]
    for name, reason in fact["templates"].items():
        rows.append((f"template {name}", "eligible" if reason is None else f"skipped: {reason}"))
    for what, value in rows:
        table.add_row(what, escape(value))
    return table


def _gbps(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:,.0f} GB/s"

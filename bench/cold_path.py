"""Which of kernelpick's modules a cold call crosses, in order (issue 39: at most 25, none entered twice).

Two cold calls, each in a fresh process with an empty store and isolation off (so that the whole
path runs in the process that is watched; on a GPU machine the measuring would be in workers): a
`Selector` of two `extern` choices, and a `kernelpick.autotune` kernel of two configs (Triton's
interpreter on a CPU). `sys.setprofile` sees every Python call; the path keeps the kernelpick modules
whose functions the call entered, in the order first entered, how often each was entered from
another kernelpick module (a call from a module to itself is no entry; a call through torch or
Triton back into the module it came from is none either), and which were entered more than once
(the engine calling a front back, a helper used from several places, or one module's function
called in a loop from another). Of those, `called_back` lists the entries into a module that is on
the stack already, below another module (a callback: a module's function given to another and called
by it), as "module.function from module.function", with how often.

Run from the repository root (CPU or GPU):

    PYTHONPATH=src python3 bench/cold_path.py            # or --out FOLDER: the file goes there

Writes bench/results/cold_path-<device>.json: per call, the modules in order, each module's entries,
the count of modules and of the modules entered more than once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CALLS = ("selector", "autotune")


def watched(call: str) -> dict[str, Any]:
    """Make one cold call of kind `call` in this process and return its path through kernelpick."""
    import torch
    import triton
    import triton.language as tl

    import kernelpick

    if call == "selector":
        selector = kernelpick.Selector(
            "cold_add", [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: a + b, name="plus")]
        )
        inputs = (torch.randn(64), torch.randn(64))

        def run() -> None:
            selector(*inputs)

    else:

        @kernelpick.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
        @triton.jit
        def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

        x = torch.randn(256, device="cuda" if torch.cuda.is_available() else "cpu")
        out = torch.empty_like(x)

        def run() -> None:
            scale[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())

    order: list[str] = []
    entries: dict[str, int] = {}
    called_back: dict[str, int] = {}
    stack: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            here = module if module.startswith("kernelpick") else ""
            caller = next((m for m in reversed(stack) if m), "")
            if here and here != caller:
                entries[here] = entries.get(here, 0) + 1
                if here not in order:
                    order.append(here)
                if here in stack:
                    back = frame.f_back
                    entry = (
                        f"{here[11:]}.{frame.f_code.co_qualname} from {caller[11:]}.{back.f_code.co_qualname}"
                    )
                    called_back[entry] = called_back.get(entry, 0) + 1
            stack.append(here)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return {
        "modules": order,
        "entries": entries,
        "module_count": len(order),
        "entered_again": [module for module in order if entries[module] > 1],
        "called_back": called_back,
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        print(json.dumps(watched(sys.argv[2])))
        return
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else None
    sys.path.insert(0, str(HERE))
    from common import device_slug, environment, write_result

    report: dict[str, Any] = {"environment": environment(), "calls": {}}
    for call in CALLS:
        with tempfile.TemporaryDirectory(prefix="cold-path-") as cache:
            env = {
                **os.environ,
                "KERNELPICK_CACHE_DIR": cache,
                "KERNELPICK_ISOLATE": "off",
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [os.environ.get("PYTHONPATH"), str(HERE.parent / "src")])
                ),
            }
            done = subprocess.run(
                [sys.executable, __file__, "--role", call],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                raise SystemExit(f"the {call} call failed:\n{done.stderr[-3000:]}")
            found = json.loads(done.stdout.strip().splitlines()[-1])
        report["calls"][call] = found
        again = found["entered_again"]
        print(f"{call}: {found['module_count']} modules, {len(again)} of them entered more than once")
        for module in found["modules"]:
            print(f"  {module} ({found['entries'][module]})")
        print(f"  called back: {len(found['called_back'])} functions")
        for entry, count in found["called_back"].items():
            print(f"    {entry} ({count})")
    if out is None:
        print(f"wrote {write_result('cold_path', report)}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"cold_path-{device_slug(report['environment'].get('device', 'cpu'))}.json"
        path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

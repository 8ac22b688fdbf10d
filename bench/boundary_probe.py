"""What the process boundary can rest on, measured on a GPU machine (issue: one process boundary).

Three questions, each answered in a fresh process so that nothing is warm:

1. Where a worker's start goes: `import torch`, `import triton`, `import kernelpick`, the CUDA
   context, alone and beside 16 busy processes (as 16 forked compilers keep the cores busy).
2. Whether a process forked after `import torch` can use CUDA: forked before any CUDA call, after
   `torch.cuda.is_available()`, after a CUDA tensor was made; and how long the fork and the child's
   first CUDA tensor take.
3. Whether a kernel compiled in one process launches in another that has only Triton's cache entry
   (no kernel object, no user module): the entry's files, its hash and the launch signature.

Usage (on the device machine): python3 bench/boundary_probe.py OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = sys.executable


def timed_command(code: str, busy: int = 0) -> dict[str, float | str]:
    """Seconds `python -c code` takes in a fresh process, with `busy` spinning processes beside it."""
    spinners = [
        subprocess.Popen([PYTHON, "-c", "import os\nos.nice(5)\nwhile True: pass"]) for _ in range(busy)
    ]
    try:
        time.sleep(0.2 if busy else 0)
        started = time.perf_counter()
        done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300)
        seconds = time.perf_counter() - started
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return {"seconds": round(seconds, 3), "rc": done.returncode, "tail": done.stderr[-300:]}


STARTS = {
    "python": "pass",
    "import torch": "import torch",
    "import triton": "import triton",
    "import torch, triton, kernelpick": "import torch, triton, kernelpick",
    "torch + CUDA context": "import torch; torch.ones(1, device='cuda').sum().item()",
    "kernelpick worker imports + CUDA context": (
        "import torch, triton, kernelpick, kernelpick.workers.main; torch.ones(1, device='cuda').sum().item()"
    ),
}

FORK_PROBE = r"""
import os, sys, time, json, signal
import torch, triton, kernelpick
case = sys.argv[1]
if case == "is_available":
    torch.cuda.is_available(); torch.cuda.device_count()
elif case == "nvml_count":
    torch.cuda._device_count_nvml()
elif case == "tensor":
    torch.ones(1, device="cuda").sum().item()
read, write = os.pipe()
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    forked = time.perf_counter() - started
    signal.alarm(60)
    os.close(read)
    result = {"fork_s": forked}
    try:
        t = time.perf_counter()
        value = torch.ones(4, device="cuda").sum().item()
        result.update(ok=value == 4.0, first_tensor_s=time.perf_counter() - t)
    except Exception as error:
        result.update(ok=False, error=f"{type(error).__name__}: {error}"[:300])
    os.write(write, json.dumps(result).encode())
    os._exit(0)
os.close(write)
_, status = os.waitpid(pid, 0)
data = os.read(read, 65536)
print(json.dumps({"case": case, "status": status, **(json.loads(data) if data else {"ok": False, "error": "no answer"})}))
"""

COMPILE_HERE = r"""
import json, sys
import torch, triton, triton.language as tl

@triton.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)

x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda"); out = torch.empty_like(x)
compiled = scale_add.warmup(x, y, out, 4096, 0.5, BLOCK=256, grid=(16,))
src = compiled.src
entry = {
    "hash": compiled.hash,
    "files": {name: str(path) for name, path in compiled.metadata_group.items()},
    "signature": {str(k): v for k, v in src.signature.items()},
    "arg_names": list(scale_add.arg_names),
    "constants": [[list(k), repr(v)] for k, v in src.constants.items()],
}
print(json.dumps(entry))
"""

LAUNCH_ELSEWHERE = r"""
import json, sys, time, types
import torch
from triton.compiler.compiler import CompiledKernel
entry = json.loads(sys.argv[1])
started = time.perf_counter()
source = types.SimpleNamespace(signature=entry["signature"], constants={},
                               fn=types.SimpleNamespace(arg_names=entry["arg_names"]))
kernel = CompiledKernel(source, entry["files"], entry["hash"])
x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda"); out = torch.empty_like(x)
kernel[(16, 1, 1)](x, y, out, 4096, 0.5, 256)
torch.cuda.synchronize()
ok = torch.allclose(out, 0.5 * x + y)
print(json.dumps({"ok": bool(ok), "load_and_launch_s": time.perf_counter() - started,
                  "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("kernelpick", "__main__"))}))
"""


def main() -> None:
    out = Path(sys.argv[1])
    result: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "device": subprocess.run(
            [PYTHON, "-c", "import torch; print(torch.cuda.get_device_name(0))"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "versions": subprocess.run(
            [PYTHON, "-c", "import torch, triton; print(torch.__version__, triton.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "cores": os.cpu_count(),
    }
    starts: dict[str, object] = {}
    for name, code in STARTS.items():
        starts[name] = {"idle": [timed_command(code) for _ in range(2)], "busy16": [timed_command(code, 16)]}
        print(name, json.dumps(starts[name]), flush=True)
    result["starts"] = starts
    forks = []
    for case in ("plain", "nvml_count", "is_available", "tensor"):
        done = subprocess.run([PYTHON, "-c", FORK_PROBE, case], capture_output=True, text=True, timeout=120)
        forks.append(
            json.loads(done.stdout.strip().splitlines()[-1])
            if done.stdout.strip()
            else {"case": case, "stderr": done.stderr[-500:]}
        )
        print("fork", json.dumps(forks[-1]), flush=True)
    result["forks"] = forks
    script = Path(tempfile.mkdtemp()) / "compile_here.py"  # Triton reads a kernel's source from its file
    script.write_text(COMPILE_HERE)
    compiled = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, timeout=300)
    entry = compiled.stdout.strip().splitlines()[-1] if compiled.stdout.strip() else ""
    launch: dict[str, object] = {
        "compile_stderr": compiled.stderr[-500:],
        "entry": json.loads(entry) if entry else None,
    }
    if entry:
        done = subprocess.run(
            [PYTHON, "-c", LAUNCH_ELSEWHERE, entry], capture_output=True, text=True, timeout=300
        )
        launch["launch"] = (
            json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else done.stderr[-1500:]
        )
    print("launch", json.dumps(launch.get("launch")), flush=True)
    result["launch_from_cache_entry"] = launch
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

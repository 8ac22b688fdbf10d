"""Shared helpers of the GPU benchmark scripts: versions, device facts, result files, timing."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict[str, Any]:
    import torch
    import triton

    data: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
        "commit": commit(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        data.update(
            device=props.name,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            gpu_count=torch.cuda.device_count(),
        )
        try:
            data["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        except OSError:
            pass
    else:
        data["device"] = "cpu"
    return data


def commit() -> str | None:
    """The kernelpick commit measured: BENCH_COMMIT where the caller gives it, else `git rev-parse`, with
    "+changes" where the tracked files differ from that commit (the device machine's copy of the tree
    carries this tree's files over a `.git` that may be older: its HEAD alone would name the wrong
    commit); None where neither says."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]

    def git(*arguments: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(ROOT), *arguments], capture_output=True, text=True, check=False
            )
        except OSError:
            return ""
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    return head + "+changes" if git("status", "--porcelain", "--untracked-files=no") else head


def require_kernelpick() -> None:
    """Stop at once, saying why, when `kernelpick` does not import here: the runs a script starts
    as subprocesses would each fail the same way, after their set-up (`source bench/gpu_prelude.sh`
    in this shell puts src/ on the path; sourced inside a pipe, its exports are lost)."""
    try:
        import kernelpick  # noqa: F401
    except ImportError as error:
        raise SystemExit(
            f"kernelpick does not import ({error}): run `source bench/gpu_prelude.sh` in this shell "
            "(not in a pipe), or put src/ on PYTHONPATH"
        ) from None


def device_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100'."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Z]?)\b", name)
    return (match.group(1) if match else re.sub(r"[^a-z0-9]+", "-", name.lower())).lower()


def write_result(name: str, data: dict[str, Any], folder: Path | None = None) -> Path:
    """Write <folder>/<name>-<device>.json, bench/results by default (and to $OUT when the device
    tool's folder is there)."""
    slug = device_slug(data.get("environment", {}).get("device", "cpu"))
    folder = RESULTS if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{slug}.json"
    text = json.dumps(data, indent=2, default=str)
    path.write_text(text + "\n")
    out = os.environ.get("OUT")
    if out:
        Path(out, path.name).write_text(text + "\n")
    return path


def run_role(
    script: Path, role: str, env: dict[str, str], *args: str, timeout: float = 590
) -> dict[str, Any]:
    """Run `script --role ROLE` in a fresh Python process (this environment and `env`, src/ and the
    repository put on the path after what is on it: the prelude's wheels stay); it prints one JSON
    object as its last line."""
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT / "src"), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, str(script), "--role", role, *args],
        env={**os.environ, **env, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"role {role} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median(values: list[float]) -> float:
    return statistics.median(values)


def wall_clock_ms(fn: Callable[[], Any], runs: int = 3) -> float:
    """A CPU's stand-in for a device timer (smoke tests, --dry): the median of `runs` wall-clock runs
    of `fn` in ms, after one untimed run."""
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def free_port() -> int:
    """A TCP port free on this machine now (for a job's rendezvous)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def distributed_run(ranks: int, script: str) -> list[str]:
    """The command that runs `script` as `ranks` ranks under `torch.distributed.run` on this machine."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={ranks}",
        f"--master-port={free_port()}",
        script,
    ]


def graph_of(fn: Callable[[], Any], calls: int, warmups: int = 3) -> Any:
    """A CUDA graph of `calls` calls of `fn` (warmed up on a side stream first, as torch asks)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph

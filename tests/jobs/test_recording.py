"""A run recorded with KERNELPICK_RECORD is a spec: `kernelpick tune` on it stores every key the run met,
so that the program's next run, with tuning forbidden, tunes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelpick.store.sqlite import SQLiteStore

SOURCE = Path(__file__).resolve().parents[2] / "src"  # this checkout's kernelpick, in the programs too

PROGRAM = textwrap.dedent(
    """
    import sys

    import torch
    import triton

    import kernelpick
    from kernelpick.demo import add_kernel

    add = kernelpick.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])(
        add_kernel
    )


    def fast_add(a, b):
        return a + b


    def slow_add(a, b):
        for _ in range(5):
            torch.add(a, b)
        return a + b


    adder = kernelpick.Selector("adder", [kernelpick.extern(slow_add), kernelpick.extern(fast_add)])


    def launch(kernel, n):
        x = torch.randn(n)
        out = torch.empty_like(x)
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, x, out, n)
        torch.testing.assert_close(out, 2 * x)


    def main():
        for n in (64, 200):
            launch(add, n)
            print(f"add n={n} from the store: {add.last_tuning.from_store}")
        a = torch.randn(8, 32)
        adder(a, a)
        print(f"adder from the store: {adder.last_selection.from_store}")
        if "--local" in sys.argv:  # a kernel made in a function: no other process can find it
            local = kernelpick.autotune([triton.Config({"BLOCK": 16})], key=["n"])(add_kernel)
            launch(local, 64)


    if __name__ == "__main__":
        main()
    """
)


def run(command: list[str], cache: Path, cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPICK_")}
    environment.pop("TRITON_INTERPRET", None)
    environment.update(KERNELPICK_CACHE_DIR=str(cache), **variables)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, *command], cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_recorded_run_is_tuned_ahead_and_the_next_run_tunes_nothing(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    keys = tmp_path / "keys.jsonl"
    first = run([str(program), "--local"], tmp_path / "cache", tmp_path, KERNELPICK_RECORD=str(keys))
    assert first.stdout.splitlines() == [
        "add n=64 from the store: False",
        "add n=200 from the store: False",
        "adder from the store: False",
    ]
    # The kernel made in `main` is left out, with one warning; the others' three keys are recorded.
    assert first.stderr.count("cannot be recorded") == 1, first.stderr
    assert "add_kernel cannot be recorded (KERNELPICK_RECORD): no module binds it" in first.stderr
    recorded = keys.read_text()
    assert [line.split('"job": "')[1].split(")")[0] + ")" for line in recorded.splitlines()] == [
        "add_kernel(float32[64], float32[64], float32[64], 64)",
        "add_kernel(float32[200], float32[200], float32[200], 200)",
        "adder(float32[8, 32], float32[8, 32])",
    ]

    # A second run meets the same keys (from the store now): it appends nothing.
    again = run([str(program)], tmp_path / "cache", tmp_path, KERNELPICK_RECORD=str(keys))
    assert "from the store: False" not in again.stdout
    assert keys.read_text() == recorded

    # `kernelpick tune` on the recording, from another folder, into a fresh cache.
    fresh = tmp_path / "fresh-cache"
    tuned = run(["-m", "kernelpick.cli", "tune", str(keys)], fresh, Path("/"))
    assert "3 of 3 jobs tuned on cpu" in tuned.stderr, tuned.stderr
    rows = list(SQLiteStore(fresh / "results.sqlite3").rows())
    stored = {(row.key.kernel, str(row.key.inputs)) for row in rows if row.picked}
    assert sorted(kernel for kernel, _ in stored) == ["add_kernel", "add_kernel", "adder"]

    # The program's next run on that cache, tuning forbidden: every call runs from the store.
    deployed = run([str(program)], fresh, tmp_path, KERNELPICK_NO_TUNING="1")
    assert deployed.stdout.splitlines() == [
        "add n=64 from the store: True",
        "add n=200 from the store: True",
        "adder from the store: True",
    ]

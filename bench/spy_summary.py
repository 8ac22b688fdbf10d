"""Summarize py-spy's raw output of a multi-process run: per process, the seconds spent in each function.

`py-spy record --subprocesses --idle --rate R -f raw -o FILE -- COMMAND` (bench/ranks.py's docstring
says how to run it on the device) writes one line per distinct stack: the process chain, the frames,
then how many samples had that stack. Per process, this keeps its samples' stacks that pass through
a frame whose text contains `--within` (default: any), and gives each function's inclusive seconds
(samples / rate; threads add up, so a process's total can exceed the wall time), the largest first.

    python3 bench/spy_summary.py RAW [RAW ...] --within "answer (" --top 40 --out bench/results/X.json

bench/results/ranks_profile_workers-h200.json and ranks_profile_ranks-h200.json are the run of
2026-11-30 at 9dd778c on two H200s (ranks1.raw: one rank alone, ranks2.raw: two ranks), within a
worker's `answer (` and a rank's `first_call (` respectively.

Processes are named by pid and told apart by the frame their main stack starts from: a rank's
(`first_call (ranks.py`), a worker's (`serve (main.py`), a compiler's, and so on.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path


def function_of(frame: str) -> str:
    """'answer (kernelpick/workers/request.py:214)' -> 'answer (request.py)'."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1].split(':')[0].rstrip(')')})" if where else name


def summarize(path: Path, within: str, rate: float, top: int) -> dict[str, dict[str, object]]:
    samples: collections.Counter[str] = collections.Counter()
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        processes = [f for f in frames if f.startswith("process ")]
        if not processes or not any(within in f for f in frames):
            continue
        pid = processes[-1].split(":")[0].removeprefix("process ")
        samples[pid] += int(count)
        for function in {function_of(f) for f in frames if not f.startswith("process ")}:
            inclusive[pid][function] += int(count)
    return {
        pid: {
            "seconds": total / rate,
            "functions": {name: n / rate for name, n in inclusive[pid].most_common(top)},
        }
        for pid, total in samples.most_common()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", nargs="+", type=Path)
    parser.add_argument("--within", default="", help="keep stacks through a frame containing this text")
    parser.add_argument("--rate", type=float, default=100.0, help="py-spy's samples per second")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--processes", type=int, default=4, help="the busiest this many processes per file")
    parser.add_argument(
        "--environment", type=Path, help="a results file of the same run: its environment is kept"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    found: dict[str, object] = {"within": args.within, "rate": args.rate}
    if args.environment is not None:
        found["environment"] = json.loads(args.environment.read_text())["environment"]
    for path in args.raw:
        processes = summarize(path, args.within, args.rate, args.top)
        found[path.name] = dict(list(processes.items())[: args.processes])
    text = json.dumps(found, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""engine/ranks.py: the ranks of a torch.distributed job (real gloo groups of CPU processes) deal each
key's candidates out between them, measure each once, and all run one pick."""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.device import describe
from kernelpick.engine.ranks import KeyShare, RankJob, rank_job
from kernelpick.engine.tuning import Tuning, pick_against_reference
from kernelpick.errors import StoreError
from kernelpick.store import TuningKey
from tests.bench_scripts import run_bench

#: A rank of a job of argv[2] ranks: a selector of 8 choices that each sleep alike on every call (ranks
#: picking on their own would each pick their own), each call written to a file as "rank size
#: choice". It tunes three keys with every rank, then rank 0 a fourth alone. Rank argv[6] (if any)
#: dies in its first call of a choice; rank 0 starts a second after the others when one dies.
SELECTOR_RANK = """
import json, os, sys, time
import torch, torch.distributed as dist
from kernelpick import Selector, extern

rank, world, port, calls, delay, dies = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

def choice(number):
    def sleepy(a):
        if rank == dies:
            os._exit(3)
        with open(calls, "a") as marks:
            marks.write(f"{rank} {a.numel()} {number}\\n")
        time.sleep(delay)
        return a + 0
    return extern(sleepy, name=f"choice{number}")

selector = Selector("shared", [choice(n) for n in range(8)], reference=lambda a: a + 0)
dist.barrier()
if dies >= 0 and rank == 0:
    time.sleep(1.0)  # the rank that dies takes the first part
started = time.monotonic()
picks = {}
for size in (4, 8, 16) if dies < 0 else (4,):
    picks[size] = selector.tune(torch.ones(size)).best
together = time.monotonic() - started
started = time.monotonic()
if rank == 0 and dies < 0:
    selector.tune(torch.ones(32))
print(json.dumps({"rank": rank, "picks": picks, "seconds": together, "alone": time.monotonic() - started}))
"""


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(
    script: str, world: int, folder: Path, *args: str, **environment: str
) -> tuple[list[subprocess.CompletedProcess[str]], list[dict[str, Any]]]:
    """Run `script` as each rank of a gloo job of `world` CPU processes, each with a store of its own
    (as on a machine of its own); each one's process and what it printed."""
    port = str(_port())
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(rank), str(world), port, *args],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(sys.path),
                "KERNELPICK_CACHE_DIR": str(folder / f"cache{rank}"),
                **environment,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    done = []
    for process in ranks:
        out, err = process.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    printed = [json.loads(d.stdout.splitlines()[-1]) for d in done if d.returncode == 0]
    return done, printed


def calls(folder: Path) -> dict[tuple[int, int], set[int]]:
    """The ranks that called each choice, by (size, choice)."""
    found: dict[tuple[int, int], set[int]] = {}
    for line in (folder / "calls").read_text().splitlines():
        rank, size, number = map(int, line.split())
        found.setdefault((size, number), set()).add(rank)
    return found


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_measure_each_candidate_once_between_them_and_all_run_one_pick(
    tmp_path: Path, world: int
) -> None:
    done, printed = run_ranks(
        SELECTOR_RANK, world, tmp_path, str(tmp_path / "calls"), "0.002", "-1", KERNELPICK_WAIT_TIMEOUT="60"
    )
    assert all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    measured = calls(tmp_path)
    for size in (4, 8, 16):
        assert all(len(measured[size, number]) == 1 for number in range(8))  # once, by one rank
        assert set().union(*(measured[size, n] for n in range(8))) == set(range(world))  # dealt out
    assert all(p["picks"] == printed[0]["picks"] for p in printed)  # every rank runs one pick per key
    # A key only rank 0 meets is tuned there at once: nobody is waited for.
    assert all(measured[32, number] == {0} for number in range(8))
    assert printed[0]["alone"] < 10.0


def test_with_ranks_off_every_rank_tunes_every_key_itself(tmp_path: Path) -> None:
    done, _ = run_ranks(
        SELECTOR_RANK, 2, tmp_path, str(tmp_path / "calls"), "0.002", "-1", KERNELPICK_RANKS="0"
    )
    assert all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    measured = calls(tmp_path)
    assert all(measured[size, number] == {0, 1} for size in (4, 8, 16) for number in range(8))


def test_a_part_whose_rank_died_is_measured_by_another_after_the_timeout(tmp_path: Path) -> None:
    done, printed = run_ranks(
        SELECTOR_RANK, 2, tmp_path, str(tmp_path / "calls"), "0.002", "1", KERNELPICK_WAIT_TIMEOUT="3"
    )
    assert done[1].returncode == 3 and done[0].returncode == 0, done[0].stderr[-2000:]
    [survivor] = printed
    assert survivor["seconds"] >= 3.0  # it waited for the part the other rank took, then measured it
    assert "has not published it in 3 s (KERNELPICK_WAIT_TIMEOUT); measuring it here" in done[0].stderr
    assert all(calls(tmp_path)[4, number] == {0} for number in range(8))


#: A rank of a job of argv[2] ranks: a Triton kernel (run in the interpreter) tuned over 4 configs
#: for 2 sizes, each config's pre_hook counting its runs in a file as "rank n BLOCK".
AUTOTUNE_RANK = """
import json, sys
import torch, torch.distributed as dist, triton
import kernelpick
from tests.tune.kernels import add_kernel, grid_1d

rank, world, port, calls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
size = 0

def counted(block):
    def hook(named):
        with open(calls, "a") as marks:
            marks.write(f"{rank} {size} {block}\\n")
    return triton.Config({"BLOCK": block}, pre_hook=hook)

tuned = kernelpick.autotune([counted(b) for b in (32, 64, 128, 256)], key=["n"])(add_kernel)
dist.barrier()
picks = {}
for size in (1000, 3000):
    x = torch.randn(size)
    out = torch.empty_like(x)
    tuned[grid_1d(size)](x, x, out, size)
    assert torch.equal(out, x + x)
    picks[size] = tuned.best_config.kwargs["BLOCK"]
print(json.dumps({"rank": rank, "picks": picks}))
"""


def test_ranks_deal_out_an_autotuned_kernels_configs_and_all_launch_one(tmp_path: Path) -> None:
    done, printed = run_ranks(AUTOTUNE_RANK, 2, tmp_path, str(tmp_path / "calls"))
    assert all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    assert printed[0]["picks"] == printed[1]["picks"]
    runs: dict[tuple[int, int, int], int] = {}
    for line in (tmp_path / "calls").read_text().splitlines():
        rank, size, block = map(int, line.split())
        runs[rank, size, block] = runs.get((rank, size, block), 0) + 1
    for size in (1000, 3000):
        best = printed[0]["picks"][str(size)]
        for rank in (0, 1):
            runs[rank, size, best] -= 1  # the launch itself, on each rank
        timed = {(rank, block) for (rank, s, block), n in runs.items() if s == size and n > 0}
        assert sorted(block for _, block in timed) == [32, 64, 128, 256]  # each config by one rank
        assert {rank for rank, _ in timed} == {0, 1}


# -- the exchange itself, on a store in this process ---------------------------------------------


def timed(ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary(ms, ms, ms, ms, 0.0, 10, 0, "wall"))


def share(rank: int, store: Any, digests: list[str], parts: int = 2) -> KeyShare:
    return KeyShare(RankJob(store, rank, 2), "key", digests, parts)


def test_parts_are_taken_once_and_a_part_published_first_stays() -> None:
    store = dist.HashStore()
    first, second = share(0, store, ["a", "b", "c"]), share(1, store, ["a", "b", "c"])
    assert first.parts == [["a", "c"], ["b"]]
    assert [second.claim(), first.claim(), first.claim()] == [1, 0, None]  # each its own part first
    assert first.publish(0, {"a": timed(1.0), "c": timed(2.0)}) == {"a": timed(1.0), "c": timed(2.0)}
    assert second.publish(0, {"a": timed(9.0)})["a"] == timed(1.0)  # a late copy changes nothing
    deadline = 0.0  # already passed: only what is there
    assert second.wait(1, deadline) is None
    assert second.wait(0, float("inf")) == {"a": timed(1.0), "c": timed(2.0)}


def test_a_rank_takes_its_own_part_at_every_key_and_then_what_a_late_rank_left() -> None:
    store = dist.HashStore()
    digests = ["a", "b", "c", "d"]
    for key in ("k1", "k2"):  # whoever comes first: each rank measures the same configs at every key
        late = KeyShare(RankJob(store, 1, 2), key, digests, 2)
        early = KeyShare(RankJob(store, 0, 2), key, digests, 2)
        assert (late.claim(), early.claim()) == (1, 0)
    alone = KeyShare(RankJob(store, 1, 2), "k3", digests, 2)
    assert [alone.claim(), alone.claim(), alone.claim()] == [1, 0, None]  # rank 0 has not come yet
    assert KeyShare(RankJob(store, 0, 2), "k3", digests, 2).claim() is None


def test_each_rank_offers_its_lowest_cost_so_far_and_reads_the_others() -> None:
    store = dist.HashStore()
    first, second = share(0, store, ["a", "b"]), share(1, store, ["a", "b"])
    assert first.lowest_elsewhere() == float("inf")  # nobody offered anything yet
    second.offer(2.0)
    second.offer(3.0)  # not lower: the offer stands at 2.0
    assert first.lowest_elsewhere() == 2.0
    assert second.lowest_elsewhere() == float("inf")  # its own offer is not "elsewhere"
    first.offer(1.5)
    assert second.lowest_elsewhere() == 1.5

    class Broken:
        def set(self, key: str, value: str) -> None:
            raise RuntimeError("connection reset")

        check = set

    broken = share(0, Broken(), ["a"])
    broken.offer(1.0)  # best effort: the tuning meets a failing store at its next step
    assert broken.lowest_elsewhere() == float("inf")


def test_a_ranks_first_round_counts_the_other_ranks_lowest_cost(tmp_path: Path) -> None:
    key = TuningKey.make("add", "source", describe(torch.device("cpu")), [16])
    tuning = Tuning("kernel `add`", "(n=16)", key, None, "cpu")
    store = dist.HashStore()
    KeyShare(RankJob(store, 1, 2), key.digest, list("abcd"), 2).offer(0.25)  # rank 1 timed b: 0.25 ms
    seen: list[float] = []

    def measure(todo: list[str], known: Any, on_done: Any, best_ms: Any) -> dict[str, BenchmarkResult]:
        seen.append(best_ms())
        results = {d: timed(float(ord(d[0]) - ord("a") + 1)) for d in todo}
        for digest, result in results.items():
            on_done(digest, result)
        return results

    with tuning:
        tuning._settle_as_rank(
            RankJob(store, 0, 2),
            list("abcd"),
            measure,
            lambda r: pick_against_reference(r, None),
            lambda d: {"name": d},
            True,
        )
    assert seen[0] == 0.25  # its own part, a and c, is cut against rank 1's 0.25 ms
    rank1 = KeyShare(RankJob(store, 1, 2), key.digest, list("abcd"), 2)
    assert rank1.lowest_elsewhere() == 1.0  # and it offered its own lowest, a's 1 ms


def test_each_part_re_times_its_share_of_the_finalists(tmp_path: Path) -> None:
    # A key's second round (KERNELPICK_CONFIRM_TOP, 6 by default) is shared out as its candidates
    # are: two parts re-time at most 3 each, so the job's second round is as long as one rank's.
    key = TuningKey.make("add", "source", describe(torch.device("cpu")), [16])
    tuning = Tuning("kernel `add`", "(n=16)", key, None, "cpu")
    seen: list[tuple[list[str], int]] = []

    def measure(todo: list[str], known: Any, on_done: Any, best_ms: Any) -> dict[str, BenchmarkResult]:
        seen.append((todo, settings.current().confirm_top))
        return {d: timed(float(ord(d[0]))) for d in todo}

    def choose(results: Any) -> Any:
        return pick_against_reference(results, None)

    job = RankJob(dist.HashStore(), 0, 2)  # the other rank takes no part: this one takes both
    with settings.override(confirm_top=6), tuning:
        settled = tuning._settle_as_rank(job, list("abcd"), measure, choose, lambda d: {"name": d}, True)
    assert seen == [(["a", "c"], 3), (["b", "d"], 3)]
    assert settled.pick == "a"
    with settings.override(confirm_top=2), tuning:
        tuning._settle_as_rank(RankJob(dist.HashStore(), 0, 2), list("abcd"), measure, choose, dict, True)
    assert [top for _, top in seen[2:]] == [2, 2]  # two is the fewest that make a second round


def test_the_first_decision_is_every_ranks_pick() -> None:
    store = dist.HashStore()
    assert share(1, store, ["a", "b"]).decide("b") == ("b", 1)
    assert share(0, store, ["a", "b"]).decide("a") == ("b", 1)
    # Another list of candidates for the key (another config space): another tuning.
    assert share(0, store, ["a", "b", "c"]).decide("a") == ("a", 0)


def test_what_is_not_kernelpicks_results_is_left_out_or_refused() -> None:
    store = dist.HashStore()
    job = share(0, store, ["a", "b"])
    store.set(f"{job.prefix}part/0", json.dumps({"results": {"a": {"result": {"status": "fast"}}, "z": {}}}))
    assert job.wait(0, float("inf")) == {}
    store.set(f"{job.prefix}part/1", "not json")
    with pytest.raises(StoreError, match="something else than results"):
        job.wait(1, float("inf"))


def test_a_failing_job_store_is_a_store_error() -> None:
    class Broken:
        def compare_set(self, key: str, expected: str, desired: bytes) -> bytes:
            raise RuntimeError("connection reset")

    with pytest.raises(StoreError, match="failed to take a part: RuntimeError: connection reset"):
        share(0, Broken(), ["a"]).claim()


def test_a_process_alone_or_a_job_of_one_rank_tunes_alone(tmp_path: Path) -> None:
    assert rank_job() is None  # no process group in this process
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(str(tmp_path / "store"), 1),
        rank=0,
        world_size=1,
        timeout=datetime.timedelta(seconds=30),
    )
    try:
        assert rank_job() is None
    finally:
        dist.destroy_process_group()


def test_the_ranks_benchmark_keeps_its_books_on_the_cpu(tmp_path: Path) -> None:
    # bench/ranks.py --dry: its jobs of 1 and 2 ranks, on the CPU, and the file it writes.
    run_bench("ranks.py", "--dry", "--out", str(tmp_path), timeout=300)
    data = json.loads((tmp_path / "ranks-dry.json").read_text())
    assert set(data["runs"]) == {"1", "2"} and data["dry"] is True
    for name, run in data["runs"].items():
        assert [r["rank"] for r in run["ranks"]] == list(range(int(name)))
        for report in run["ranks"]:
            assert [k["kind"] for k in report["keys"]] == ["ops.mm"] * 3 + ["autotune"] * 3
            assert all(k["pick"] and k["seconds"] > 0 for k in report["keys"])
    two = data["summary"]["2"]
    assert two["picks_identical"] and len(two["rank_total_s"]) == 2
    assert two["ratio_to_alone"] == pytest.approx(two["job_total_s"] / data["summary"]["1"]["job_total_s"])

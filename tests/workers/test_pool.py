"""workers/pool.py with scripted workers: the three steps of a measurement, and what each worker is told."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.workers.pool import WorkerPool

Answer = Callable[[dict[str, Any]], "dict[str, Any] | None"]


def timed(median_ms: float, runs: int = 10) -> dict[str, Any]:
    timing = {
        "median_ms": median_ms,
        "mean_ms": median_ms,
        "min_ms": median_ms,
        "max_ms": median_ms,
        "iqr_ms": 0.0,
        "runs": runs,
        "outliers": 0,
    }
    return {"status": "ok", "timing": timing, "message": ""}


class ScriptedWorker:
    """Stands in for a `WorkerProcess`: answers each request at once with `answer(request)`
    (None: it dies), and records the requests."""

    def __init__(self, pool: WorkerPool, slot: int, answer: Answer) -> None:
        self.pool, self.slot, self.answer = pool, slot, answer
        self.generation = 1
        self.alive = True
        self.requests: list[dict[str, Any]] = []

    def start(self) -> None:
        self.generation += 1
        self.alive = True

    def send(self, request: Mapping[str, Any]) -> None:
        assert request["candidates"] == {c: PAYLOADS[c] for c in request["candidates"]}
        self.requests.append(dict(request))
        body = self.answer(dict(request))
        if body is None:
            self.alive = False
        else:
            body = {"id": request["id"], **body}
        self.pool._messages.put((self.slot, self.generation, body))

    def kill(self) -> None:
        self.alive = False

    def exit_code(self) -> int:
        return -11

    def tail(self) -> str:
        return "worker output"

    def stop(self) -> None:
        pass


def scripted(*answers: Answer) -> tuple[WorkerPool, list[ScriptedWorker]]:
    pool = WorkerPool([])
    workers = [ScriptedWorker(pool, slot, answer) for slot, answer in enumerate(answers)]
    pool.workers = workers  # type: ignore[assignment]
    return pool, workers


MEDIANS = {"a": 3.0, "b": 1.0, "c": 1.05, "d": 2.0}
#: What a request carries of each candidate (the engine's are `values.encode`d choices).
PAYLOADS = {c: f"payload of {c}" for c in MEDIANS}


def screen_by_median(request: dict[str, Any]) -> dict[str, Any]:
    if request["step"] == "confirm":
        return {"results": {c: timed(MEDIANS[c] * 2) for c in request["candidates"]}}
    if request["step"] == "prepare":
        return {"results": {}}
    return {"results": {c: timed(MEDIANS[c]) for c in request["candidates"]}}


def test_each_screening_request_carries_the_fastest_median_so_far() -> None:
    pool, (worker,) = scripted(screen_by_median)
    results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0)
    assert [r["best_ms"] for r in worker.requests] == [None, 3.0, 1.0, 1.0]
    assert [list(r["candidates"]) for r in worker.requests] == [["a"], ["b"], ["c"], ["d"]]
    assert {c: r.median_ms for c, r in results.items()} == MEDIANS


def test_a_screening_request_carries_the_lowest_cost_of_other_ranks_when_it_is_lower() -> None:
    pool, (worker,) = scripted(screen_by_median)
    pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, best_ms=lambda: 2.0)
    assert [r["best_ms"] for r in worker.requests] == [2.0, 2.0, 1.0, 1.0]


def test_the_cutoff_is_the_lowest_device_time_so_far_host_time_aside() -> None:
    def host_bound(request: dict[str, Any]) -> dict[str, Any]:
        (candidate,) = request["candidates"]
        timing = TimingSummary.of([MEDIANS[candidate]] * 3).with_host(5.0 if candidate == "b" else None)
        return {"results": {candidate: BenchmarkResult("ok", timing).to_dict()}}

    pool, (worker,) = scripted(host_bound)
    pool.measure({}, ["a", "b", "c"], PAYLOADS, timeout_s=5.0)
    # b runs 1 ms on the device and 5 ms on the host: the device time ranks, b is the fastest so far.
    assert [r["best_ms"] for r in worker.requests] == [None, 3.0, 1.0]


def test_every_candidate_is_screened_once() -> None:
    pool, (worker,) = scripted(screen_by_median)
    pool.measure({}, ["b", "c", "a", "d"], PAYLOADS, timeout_s=5.0)
    assert [list(r["candidates"]) for r in worker.requests] == [["b"], ["c"], ["a"], ["d"]]


def test_finalists_are_timed_again_on_every_worker_and_combined() -> None:
    def slower_gpu(request: dict[str, Any]) -> dict[str, Any]:
        if request["step"] == "confirm":  # the same ranking, 10 % slower across the board
            return {"results": {c: timed(MEDIANS[c] * 2.2) for c in request["candidates"]}}
        return screen_by_median(request)

    pool, workers = scripted(screen_by_median, slower_gpu)
    results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, confirm_top=3, confirm_within=0.1)
    confirms = [r for w in workers for r in w.requests if r["step"] == "confirm"]
    assert [(list(r["candidates"]), r["share"]) for r in confirms] == [(["b", "c"], 0.5), (["b", "c"], 0.5)]
    assert results["b"].median_ms == pytest.approx(2.1)  # the mean of 2.0 and 2.2
    assert results["b"].timing is not None and results["b"].timing.runs == 20
    # Not a finalist: its first figure on the second round's scale (both finalists' ratio is 2.1).
    assert results["a"].median_ms == pytest.approx(3.0 * 2.1)


def test_a_second_round_that_fails_on_one_worker_uses_the_others(caplog: pytest.LogCaptureFixture) -> None:
    def dies_confirming(request: dict[str, Any]) -> dict[str, Any] | None:
        return None if request["step"] == "confirm" else screen_by_median(request)

    pool, _ = scripted(screen_by_median, dies_confirming)
    with caplog.at_level(logging.WARNING, logger="kernelpick.workers"):
        results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, confirm_top=3, confirm_within=0.1)
    assert results["b"].median_ms == 2.0 and results["c"].median_ms == 2.1  # the first worker's
    assert "second round failed on a worker" in caplog.text


def test_a_second_round_that_fails_everywhere_keeps_the_first_rounds_figures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def dies_confirming(request: dict[str, Any]) -> dict[str, Any] | None:
        return None if request["step"] == "confirm" else screen_by_median(request)

    pool, _ = scripted(dies_confirming, dies_confirming)
    with caplog.at_level(logging.WARNING, logger="kernelpick.workers"):
        results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, confirm_top=3, confirm_within=0.1)
    assert {c: r.median_ms for c, r in results.items()} == MEDIANS
    assert "keeping the first round's timings" in caplog.text


def test_prepare_splits_the_candidates_and_its_failures_are_final() -> None:
    def rejects_d(request: dict[str, Any]) -> dict[str, Any]:
        if request["step"] == "prepare":
            failed = {"status": "compile_error", "timing": None, "message": "bad block"}
            return {"results": {c: failed for c in request["candidates"] if c == "d"}}
        return screen_by_median(request)

    pool, workers = scripted(rejects_d, rejects_d)
    done: dict[str, str] = {}
    results = pool.measure(
        {},
        list(MEDIANS),
        PAYLOADS,
        timeout_s=5.0,
        prepare_timeout_s=5.0,
        on_done=lambda candidate, result: done.setdefault(candidate, result.status),
    )
    prepares = [list(r["candidates"]) for w in workers for r in w.requests if r["step"] == "prepare"]
    assert prepares == [["a", "c"], ["b", "d"]]
    assert results["d"].status == "compile_error"
    screened = sorted(
        c for w in workers for r in w.requests if r["step"] == "screen" for c in r["candidates"]
    )
    assert sorted(set(screened)) == ["a", "b", "c"]  # each worker's first one twice
    assert done == {"d": "compile_error", "a": "ok", "b": "ok", "c": "ok"}  # each as it was done


def test_a_worker_dying_while_compiling_only_loses_its_head_start(caplog: pytest.LogCaptureFixture) -> None:
    def dies_preparing(request: dict[str, Any]) -> dict[str, Any] | None:
        return None if request["step"] == "prepare" else screen_by_median(request)

    pool, _ = scripted(dies_preparing)
    with caplog.at_level(logging.WARNING, logger="kernelpick.workers"):
        results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, prepare_timeout_s=5.0)
    assert {c: r.median_ms for c, r in results.items()} == MEDIANS
    assert "died while compiling" in caplog.text


def test_answers_to_requests_given_up_on_are_ignored() -> None:
    pool, (worker,) = scripted(screen_by_median)
    # An answer left over from an earlier, abandoned measurement: same worker, same generation.
    pool._messages.put((0, worker.generation, {"id": -1, "results": {"a": timed(0.001)}}))
    results = pool.measure({}, ["a"], PAYLOADS, timeout_s=5.0)
    assert results["a"].median_ms == 3.0


def test_candidates_fed_while_measuring_are_screened_as_they_arrive() -> None:
    import threading

    pool, (worker,) = scripted(screen_by_median)
    feed = pool.feed()

    def compile_slowly() -> None:  # as the compilers would announce them
        for candidate in MEDIANS:
            feed.put(candidate)
        feed.close()

    threading.Thread(target=compile_slowly).start()
    results = pool.measure({}, [], PAYLOADS, feed=feed, timeout_s=5.0, confirm_top=2, confirm_within=0.1)
    assert list(results) == list(MEDIANS)
    assert [r["step"] for r in worker.requests] == ["screen"] * 4 + ["confirm"]
    assert results["b"].median_ms == 2.0  # confirmed


def test_a_feed_that_closes_empty_ends_the_measurement() -> None:
    pool, (worker,) = scripted(screen_by_median)
    feed = pool.feed()
    feed.close()
    assert pool.measure({}, [], PAYLOADS, feed=feed, timeout_s=5.0) == {}
    assert worker.requests == []


def test_an_error_answer_fails_only_its_candidate_once_others_were_measured() -> None:
    def breaks_on_c(request: dict[str, Any]) -> dict[str, Any]:
        if list(request["candidates"]) == ["c"]:
            return {"error": "RuntimeError: something in kernelpick", "traceback": "..."}
        return screen_by_median(request)

    pool, _ = scripted(breaks_on_c)
    results = pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0)
    assert results["c"].status == "runtime_error" and "something in kernelpick" in results["c"].message
    assert results["b"].ok and results["d"].ok


def test_an_error_answer_to_the_first_request_means_the_workers_cannot_do_it() -> None:
    from kernelpick.workers import IsolationError

    pool, _ = scripted(lambda request: {"error": "ModuleNotFoundError: No module named 'user_code'"})
    with pytest.raises(IsolationError, match="user_code"):
        pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0)


def test_an_answer_that_came_in_time_counts_even_if_it_is_read_late() -> None:
    # Restarting a worker blocks the pool for seconds; answers that arrived meanwhile, before
    # their deadline, must not be taken for timeouts. Here the deadline has passed when the pool
    # looks (timeout 0), but the answer is already waiting.
    pool, _ = scripted(screen_by_median)
    results = pool.measure({}, ["a"], PAYLOADS, timeout_s=0.0)
    assert results["a"].ok and results["a"].median_ms == 3.0


def test_an_interrupted_measurement_kills_the_workers_busy_with_its_candidates() -> None:
    pool, workers = scripted(screen_by_median, screen_by_median)

    def interrupted(candidate: str, result: BenchmarkResult) -> None:
        raise KeyboardInterrupt  # Ctrl-C as the first result comes in

    with pytest.raises(KeyboardInterrupt):
        pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, on_done=interrupted)
    # The first answered and is idle; the second was running a candidate nobody waits for now.
    assert [w.alive for w in workers] == [True, False]


def test_a_feed_of_an_interrupted_measurement_does_not_reach_the_next() -> None:
    pool, _ = scripted(screen_by_median)
    stale = pool.feed()
    stale.put("a")  # its compiler went on after its measurement was interrupted
    stale.close()
    feed = pool.feed()
    feed.put("b")
    feed.close()
    assert list(pool.measure({}, [], PAYLOADS, feed=feed, timeout_s=5.0)) == ["b"]


def test_candidates_fed_while_the_workers_compile_others_wait_for_the_screening() -> None:
    # A selection's templates compile in the caller (fed) while the workers compile its triton_choices.
    def rejects_d(request: dict[str, Any]) -> dict[str, Any]:
        if request["step"] == "prepare":
            return {"results": {"d": {"status": "compile_error", "timing": None, "message": "bad"}}}
        return screen_by_median(request)

    pool, (worker,) = scripted(rejects_d)
    feed = pool.feed()
    feed.put("b")  # arrive before the prepare step's answer, which they must not be lost behind
    feed.put("c")
    feed.close()
    results = pool.measure({}, ["a", "d"], PAYLOADS, feed=feed, timeout_s=5.0, prepare_timeout_s=5.0)
    assert [list(r["candidates"]) for r in worker.requests if r["step"] == "prepare"] == [["a", "d"]]
    assert [list(r["candidates"]) for r in worker.requests if r["step"] == "screen"] == [["a"], ["b"], ["c"]]
    assert {c: r.status for c, r in results.items()} == {
        "a": "ok",
        "d": "compile_error",
        "b": "ok",
        "c": "ok",
    }


def test_the_workers_seconds_are_summed_into_the_phases() -> None:
    def spending(request: dict[str, Any]) -> dict[str, Any]:
        return {**screen_by_median(request), "seconds": {"load": 0.25, "measure": 1.0}}

    pool, _ = scripted(spending, spending)
    timings: dict[str, float] = {}
    pool.measure({}, list(MEDIANS), PAYLOADS, timeout_s=5.0, confirm_top=2, phases=timings)
    # Four screening requests and two of the second round (one per worker).
    assert timings["worker_load"] == pytest.approx(6 * 0.25)
    assert timings["worker_measure"] == pytest.approx(6 * 1.0)
    timings = {}
    pool.measure({}, ["a"], PAYLOADS, timeout_s=5.0, phases=timings)  # a new measurement counts afresh
    assert timings["worker_measure"] == pytest.approx(1.0)

"""tune/cluster.py: on several devices, `kernelpick tune` deals the longest jobs first.

The devices here are threads (a run of `--devices` needs CUDA GPUs): each takes the next job when it
is free, as the device processes do, and a job lasts `cost` tenths of a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.errors import ConfigError
from kernelpick.jobs import Job, JobOutcome, Journal, Spec, cluster, load_spec
from kernelpick.jobs.cluster import longest_first, tune_spec

UNIT_S = 0.1


def nothing(device: object) -> None:
    return None


def named(jobs: Sequence[Job]) -> list[str]:
    return [job.name for job in jobs]


def test_jobs_are_ranked_by_their_last_seconds_else_their_cost_scaled_to_seconds() -> None:
    jobs = [
        Job("a", nothing, cost=10),
        Job("b", nothing, cost=40),
        Job("c", nothing),
        Job("d", nothing, cost=1),
    ]
    # a took 2 s for a cost of 10: b's cost of 40 is 8 s, d's 0.2 s; c took 5 s.
    assert named(longest_first(jobs, {"a": 2.0, "c": 5.0})) == ["b", "c", "a", "d"]
    # Nothing run yet: the costs as they are; c counts as the median (10), after a, as in the spec.
    assert named(longest_first(jobs, {})) == ["b", "a", "c", "d"]


def test_a_spec_of_which_nothing_is_known_keeps_its_order() -> None:
    jobs = [Job(name, nothing) for name in "abcd"]
    assert named(longest_first(jobs, {})) == ["a", "b", "c", "d"]


def test_a_cost_must_be_a_number_of_zero_or_more() -> None:
    with pytest.raises(ConfigError, match="cost must be a number of 0 or more"):
        Job("a", nothing, cost=-1)


class ThreadDevices(cluster._ProcessRunner):
    """`--devices` with threads for GPUs; each job sleeps its cost in tenths of a second."""

    def __init__(self, spec: Spec, devices: Sequence[str]) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cluster, "_device_model", lambda: "test gpu")
            patch.setattr(cluster.torch.cuda, "is_available", lambda: True)
            patch.setattr(cluster.torch.cuda, "device_count", lambda: len(devices))
            super().__init__(spec, devices)
            for ready in self.ready:
                ready.result()

    @staticmethod
    def _pool(device: str) -> Executor:
        return ThreadPoolExecutor(1, thread_name_prefix=f"device-{device}")


def fake_run_job(spans: dict[str, tuple[float, float]]) -> object:
    lock = threading.Lock()

    def run(spec_path: str, job_name: str) -> JobOutcome:
        started = time.monotonic()
        job = load_spec(spec_path).job(job_name)
        time.sleep((job.cost or 1) * UNIT_S)
        with lock:
            spans[job_name] = (started, time.monotonic())
        return JobOutcome(job_name, "test gpu", time.monotonic() - started)

    return run


@pytest.fixture
def uneven_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "uneven_spec.py"
    spec.write_text(
        "from kernelpick.jobs import Job\n"
        "JOBS = [Job(f'short {i}', print, cost=1) for i in range(6)] + [Job('long', print, cost=4)]\n"
    )
    return spec


def test_on_two_devices_the_long_job_dealt_last_in_the_spec_starts_first(
    uneven_spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans: dict[str, tuple[float, float]] = {}
    monkeypatch.setattr(cluster, "_ProcessRunner", ThreadDevices)
    monkeypatch.setattr(cluster, "run_job", fake_run_job(spans))
    run = tune_spec(uneven_spec, devices=["0", "1"])
    assert sorted(o.job for o in run.outcomes) == sorted([f"short {i}" for i in range(6)] + ["long"])
    # Dealt in the first round (the two devices' first jobs start together: which thread runs first
    # is the scheduler's), so it started before any short job ended.
    assert spans["long"][0] < min(end for name, (_, end) in spans.items() if name != "long")
    # In the spec's order the long job would start after the six short ones, at 0.3 s, and end last
    # at 0.7 s; dealt first, it ends while the other device works through the short ones (0.5 s).
    assert spans["long"][1] < max(end for _, end in spans.values())


def test_a_fresh_run_deals_by_the_seconds_the_last_run_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "costless_spec.py"
    spec.write_text("from kernelpick.jobs import Job\nJOBS = [Job(n, print) for n in 'abc']\n")
    journal = Journal.for_spec(load_spec(spec))
    for name, seconds in (("a", 1.0), ("b", 3.0), ("c", 2.0)):
        journal.record(JobOutcome(name, "test gpu", seconds))
    dealt: list[str] = []

    def record(spec_path: str, job_name: str) -> JobOutcome:
        dealt.append(job_name)
        return JobOutcome(job_name, "test gpu", 0.01)

    monkeypatch.setattr(cluster, "_ProcessRunner", ThreadDevices)
    monkeypatch.setattr(cluster, "run_job", record)
    tune_spec(spec, devices=["0"], resume=False)
    assert dealt == ["b", "c", "a"]


def test_the_journal_gives_each_jobs_last_seconds_of_this_model_before_another_models(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.record(JobOutcome("a", "H100", 4.0))
    journal.record(JobOutcome("a", "H200", 3.0))
    journal.record(JobOutcome("b", "H200", 1.0, error="failed"))  # a failed job's seconds count too
    journal.record(JobOutcome("a", "H100", 5.0))
    assert journal.seconds("H100") == {"a": 5.0, "b": 1.0}
    assert journal.seconds("H200") == {"a": 3.0, "b": 1.0}


def test_a_ray_actor_gets_ready_to_tune_as_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    readied: list[bool] = []
    monkeypatch.setattr(cluster, "ready_to_tune", lambda: readied.append(True))
    cluster._TuneActor("spec.py", "")
    assert readied == [True]


def test_every_device_process_gets_ready_as_the_run_starts_not_at_its_first_job(
    uneven_spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    def ready(spec_path: str) -> str:
        time.sleep(3 * UNIT_S)  # a process importing torch and the spec
        with lock:
            events.append(("ready", threading.current_thread().name.split("_")[0]))
        return "test gpu"

    def run(spec_path: str, job_name: str) -> JobOutcome:
        with lock:
            events.append(("job", threading.current_thread().name.split("_")[0]))
        return JobOutcome(job_name, "test gpu", 0.0)

    monkeypatch.setattr(cluster, "_ready", ready)
    monkeypatch.setattr(cluster, "run_job", run)
    started = time.monotonic()
    runner = ThreadDevices(load_spec(uneven_spec), ["0", "1"])
    # Both got ready at once, not one after the other (6 units).
    assert time.monotonic() - started < 5 * UNIT_S
    assert sorted(events) == [("ready", "device-0"), ("ready", "device-1")]
    assert runner.device_model() == "test gpu"
    list(runner.run(load_spec(uneven_spec).jobs))
    assert all(kind == "job" for kind, _ in events[2:]) and len(events) == 2 + 7


@pytest.mark.parametrize("elsewhere", [True, False])
def test_the_command_readies_no_workers_of_its_own_where_device_processes_tune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: bool
) -> None:
    # The command's process imports the spec too (its jobs' names), and a spec's kernels and selectors
    # start workers early as they are made (plan.start_early): with --devices or --ray they would
    # idle on every GPU beside the device processes' own. Without either, this process tunes.
    from kernelpick.workers import plan

    monkeypatch.setattr(plan, "_tuning_elsewhere", False)
    seen = tmp_path / "seen.txt"
    spec = tmp_path / "readying_spec.py"
    spec.write_text(
        "from kernelpick.jobs import Job\n"
        "from kernelpick.workers import plan\n"
        f"with open({str(seen)!r}, 'a') as seen:\n"
        "    seen.write(f'{plan._tuning_elsewhere}\\n')\n"
        "JOBS = [Job('a', print)]\n"
    )
    monkeypatch.setattr(cluster, "_ProcessRunner", ThreadDevices)
    monkeypatch.setattr(cluster, "run_job", lambda *args: JobOutcome("a", "test gpu", 0.01))
    tune_spec(spec, devices=["0"] if elsewhere else [])
    assert set(seen.read_text().split()) == {str(elsewhere)}


def test_a_device_process_gets_ready_by_importing_the_spec(uneven_spec: Path) -> None:
    from kernelpick.jobs import spec

    assert uneven_spec.resolve() not in spec._loaded
    assert cluster._ready(str(uneven_spec)) == cluster._device_model()
    assert uneven_spec.resolve() in spec._loaded  # its first job finds it imported


def test_a_spec_that_does_not_import_in_a_device_process_leaves_it_to_the_jobs(tmp_path: Path) -> None:
    broken = tmp_path / "broken_spec.py"
    broken.write_text("raise RuntimeError('no GPU library here')\n")
    assert cluster._ready(str(broken)) == cluster._device_model()  # each job says why it fails


def test_a_device_process_is_given_its_gpu_as_the_machine_numbers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # `CUDA_VISIBLE_DEVICES=2,3 kernelpick tune --devices 0,1`: the processes own GPUs 2 and 3, told
    # to their settings, and to their environment as a worker's (tests/jobs/test_device_process.py).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    made: list[tuple[object, object]] = []

    class Process:
        def __init__(self, device: int, initializer: object, initargs: tuple[object, ...]):
            made.append((device, initargs[0]))

    monkeypatch.setattr(cluster, "DeviceProcess", Process)
    pools = [cluster._ProcessRunner._pool("0"), cluster._ProcessRunner._pool("1")]
    assert all(isinstance(pool, Process) for pool in pools)
    assert made == [(0, "2"), (1, "3")]


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        (["2"], "names GPU '2', but this process sees GPUs 0 to 1"),
        (["a"], "names GPU 'a', but this process sees GPUs 0 to 1"),
        (["-1"], "names GPU '-1'"),
        (["0", "1", "0"], "names GPU 0 twice"),
    ],
)
def test_devices_must_be_distinct_gpus_this_process_sees(devices: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cluster._check_devices(devices, 2)
    cluster._check_devices(["1", "0"], 2)  # any order


def test_the_device_processes_are_ended_all_at_once(
    uneven_spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each device's process takes a while to end (its workers stop): 0.3 s here, for 3 devices.
    ends: list[tuple[float, float]] = []

    class SlowToEnd(ThreadPoolExecutor):
        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            started = time.monotonic()
            time.sleep(0.3)
            super().shutdown(wait, cancel_futures=cancel_futures)
            ends.append((started, time.monotonic()))

    class SlowDevices(ThreadDevices):
        @staticmethod
        def _pool(device: str) -> Executor:
            return SlowToEnd(1, thread_name_prefix=f"device-{device}")

    monkeypatch.setattr(cluster, "_ProcessRunner", SlowDevices)
    monkeypatch.setattr(cluster, "run_job", fake_run_job({}))
    tune_spec(uneven_spec, devices=["0", "1", "2"])
    assert len(ends) == 3
    assert max(start for start, _ in ends) < min(end for _, end in ends)  # each began before any ended


def test_a_node_copies_the_spec_into_a_private_folder_not_a_predictable_shared_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Ray node without the spec wrote it to $TMPDIR/kernelpick-specs/<name> and imported it from
    # there: another local user could make that folder first, with a symlink or a planted module.
    import stat
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / "kernelpick-specs"
    planted.mkdir()
    (planted / "their_spec.py").symlink_to(tmp_path / "victim.txt")
    source = "JOBS = []\n"
    copy = cluster._local_copy("/elsewhere/their_spec.py", source)
    assert planted not in copy.parents and not (tmp_path / "victim.txt").exists()
    assert copy.read_text() == source
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    assert cluster._local_copy("/elsewhere/their_spec.py", source) == copy  # once per text


def test_a_node_sending_results_that_are_refused_fails_its_job_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "two_jobs_spec.py"
    spec.write_text("from kernelpick.jobs import Job\nJOBS = [Job('bad', print), Job('good', print)]\n")
    forged = {
        "key": {"kernel": "k"},
        "results": [{"candidate": "x", "description": {}, "result": {"status": "ok"}}],
    }
    monkeypatch.setattr(cluster, "_ProcessRunner", ThreadDevices)
    monkeypatch.setattr(
        cluster,
        "run_job",
        lambda spec_path, name, *args: JobOutcome(
            name, "test gpu", 0.01, rows=(forged,) if name == "bad" else ()
        ),
    )
    run = tune_spec(spec, devices=["0"])
    errors = {outcome.job: outcome.error for outcome in run.outcomes}
    assert errors["good"] == "" and errors["bad"].startswith("the results its node sent were refused")


def test_the_jobs_keep_their_gpu_workers_up_between_keys_unless_told_otherwise(
    uneven_spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program's idle workers end (their CUDA contexts slow its kernels); a tune run's stay up.
    idle: list[float] = []

    def run_job(spec: str, job_name: str) -> JobOutcome:
        idle.append(settings.current().worker_idle_s)
        return JobOutcome(job_name, "test gpu", 0.0)

    monkeypatch.setattr(cluster, "run_job", run_job)
    tune_spec(uneven_spec)
    assert idle == [3600.0] * 7 and settings.current().worker_idle_s == 0.0
    assert cluster.job_environment()["KERNELPICK_WORKER_IDLE"] == "3600"
    with settings.override(worker_idle_s=5.0):
        assert cluster.job_environment()["KERNELPICK_WORKER_IDLE"] == "5.0"


def test_a_job_tunes_before_it_ends_even_with_background_tuning_on(tmp_path: Path) -> None:
    # A provisional pick would end the job untuned: `run_job` turns background tuning off.
    spec = tmp_path / "background_spec.py"
    spec.write_text(
        "import torch\n"
        "import kernelpick\n"
        "from kernelpick.jobs import Job, tensor\n"
        "SELECTOR = kernelpick.Selector('job_add', [kernelpick.extern(torch.add), "
        "kernelpick.extern(lambda a, b: a + b, name='plus')])\n"
        "JOBS = [Job.select(SELECTOR, tensor('float32', 64), tensor('float32', 64))]\n"
    )
    with settings.override(background=True, cache_dir=tmp_path / "cache", isolate="off"):
        [job] = load_spec(spec).jobs
        outcome = cluster.run_job(str(spec), job.name, "cpu")
        record = load_spec(spec).module.SELECTOR.last_selection
    assert outcome.error == "" and record is not None and not record.provisional

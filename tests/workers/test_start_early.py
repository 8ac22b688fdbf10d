"""workers/plan.py: what a program gets ready for its first tuning when it makes a tuned kernel."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.workers import plan


class Started:
    """What `start_early` started, on what it takes for a GPU machine (the workers and the compiler's
    warm-up start beside each other, in threads of their own)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.changed = threading.Condition()

    def workers(self) -> None:
        self._add("workers")

    def compiler(self) -> None:
        self._add("compiler")

    def _add(self, call: str) -> None:
        with self.changed:
            self.calls.append(call)
            self.changed.notify_all()

    def wait_for(self, *calls: str, timeout: float = 10) -> list[str]:
        """The calls made, in a stable order, once there are as many as `calls` (or after `timeout`)."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.calls) >= len(calls), timeout)
            return sorted(self.calls)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Started:
    record = Started()
    monkeypatch.setattr(plan, "_started_early", False)
    monkeypatch.setattr(plan, "_tuning_elsewhere", False)
    monkeypatch.setattr(plan.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(plan, "start_workers", record.workers)
    monkeypatch.setattr("kernelpick.compile.precompile.warm_up_compiler", record.compiler)
    return record


def test_the_first_tuned_kernel_starts_workers_and_warms_the_compiler_once(started: Started) -> None:
    plan.start_early(None)
    plan.start_early(None)
    assert started.wait_for("compiler", "workers") == ["compiler", "workers"]


def test_with_isolation_off_only_the_compiler_warms(started: Started) -> None:
    plan.start_early(False)
    assert started.wait_for("compiler") == ["compiler"]


def test_a_rank_among_several_on_a_machine_warms_the_compiler_and_starts_its_workers_later(
    started: Started, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torchrun says how many ranks it started here; which GPU is this rank's, the program says later.
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    plan.start_early(None)
    assert started.wait_for("compiler") == ["compiler"]


def test_nothing_starts_in_a_multiprocessing_child(started: Started, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan.multiprocessing, "parent_process", lambda: object())
    plan.start_early(None)
    assert started.wait_for("compiler", timeout=0.5) == []


def test_nothing_starts_in_a_worker(started: Started, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan, "inside_worker", True)
    plan.start_early(None)
    assert started.wait_for("compiler", timeout=0.5) == []


def test_nothing_starts_when_the_process_never_tunes(started: Started) -> None:
    from kernelpick import settings

    with settings.override(no_tuning=True):
        plan.start_early(None)
    assert started.wait_for("compiler", timeout=0.5) == []


def test_nothing_starts_in_a_process_that_hands_its_tuning_to_others(started: Started) -> None:
    # `kernelpick tune --devices` or `--ray`: the device processes or Ray actors tune, not this one.
    plan.tune_elsewhere()
    plan.start_early(None)
    assert started.wait_for("compiler", timeout=0.5) == []


ENDS_AT_ONCE = """
import sys
import time
import torch
from kernelpick.workers import plan

def cuda_set_up():  # on a GPU machine, CUDA's set-up takes a moment
    time.sleep(1.0)
    with open(sys.argv[1], "a") as done:
        done.write("set up\\n")
    return False

torch.cuda.is_available = cuda_set_up
plan.start_early(True)
"""


def test_a_program_that_ends_at_once_waits_for_what_started_early(tmp_path: Path) -> None:
    # A script that made a selector and ended at once aborted on an H200 in 3 of 3 runs ("FATAL:
    # exception not rethrown", exit 134): a thread started early was in CUDA's set-up as the
    # interpreter finalized. The program waits for those threads as it ends.
    script, done = tmp_path / "ends_at_once.py", tmp_path / "done.txt"
    script.write_text(ENDS_AT_ONCE)
    ended = subprocess.run(
        [sys.executable, str(script), str(done)], capture_output=True, text=True, timeout=120
    )
    assert ended.returncode == 0, ended.stderr[-2000:]
    assert done.read_text().splitlines() == ["set up", "set up"]  # the warm-up's and the workers' thread


@pytest.mark.parametrize(
    ("nvml", "driver", "present"), [(2, False, True), (0, True, False), (-1, True, True), (-1, False, False)]
)
def test_a_gpu_is_found_through_nvml_else_through_its_driver(
    monkeypatch: pytest.MonkeyPatch, nvml: int, driver: bool, present: bool
) -> None:
    # NVML does not start in a process forked from one that used it (-1: a device process of
    # `kernelpick tune --devices`, forked by the command's zygote): its GPU is there all the same.
    monkeypatch.setattr(plan.torch.cuda, "_device_count_nvml", lambda: nvml)
    monkeypatch.setattr(plan, "_driver_present", lambda: driver)
    assert plan._gpu_present() is present


def test_workers_are_told_the_folder_rendered_kernels_are_written_to(tmp_path: Path) -> None:
    assert plan.worker_settings()["cache_dir"] == str(settings.cache_dir())
    file = tmp_path / "cache"
    file.write_text("")
    with settings.override(cache_dir=file):  # unusable: this process writes to a temporary folder
        told = plan.worker_settings()["cache_dir"]
        assert told == str(settings.cache_dir_or_temporary()) and told != str(file)


def test_a_rank_among_several_measures_on_its_own_gpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpick.device import DeviceInfo

    h100 = DeviceInfo("cuda", 1, "NVIDIA H100 80GB HBM3", (9, 0), 50 << 20, 132)
    monkeypatch.setattr(plan.torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(plan, "describe", lambda device: h100)
    assert plan.worker_devices(h100) == [0, 1, 2, 3]  # a process alone: every GPU of the model
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # one of 4 ranks here: the others use the other GPUs
    assert plan.worker_devices(h100) == [1]
    with settings.override(devices="2,3"):
        assert plan.worker_devices(h100) == [2, 3]  # unless KERNELPICK_DEVICES says otherwise


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ("4", "names GPU 4, but GPUs 0 to 3 are visible"),
        ("1,x", "is not a comma-separated list of GPU indices"),
        ("1,2,1", "names GPU 1 twice"),
    ],
)
def test_kernelpick_devices_must_name_distinct_visible_gpus(
    monkeypatch: pytest.MonkeyPatch, devices: str, message: str
) -> None:
    from kernelpick.device import DeviceInfo
    from kernelpick.errors import SettingsError

    h100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 << 20, 132)
    monkeypatch.setattr(plan.torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(plan, "describe", lambda device: h100)
    with settings.override(devices=devices), pytest.raises(SettingsError, match=message):
        plan.worker_devices(h100)

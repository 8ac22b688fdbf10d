"""tune/jobs.py and tune/cluster.py: `kernelpick tune` runs a spec's jobs, resumes, and exports what they tuned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelpick.cli import tune as command
from kernelpick.errors import ConfigError
from kernelpick.jobs import Job, JobOutcome, load_spec, tensor
from kernelpick.jobs.cluster import run_job, tune_spec
from kernelpick.store import default_store
from kernelpick.store.copying import replay
from kernelpick.store.sqlite import SQLiteStore

SPEC = Path(__file__).parent / "specs" / "small_spec.py"
JOB_NAMES = [
    "spec_add n=64",
    "spec_add n=512",
    "spec_add n=4096",
    "adder(float32[8, 64], float32[8, 64])",
    "adder(float32[32, 64], float32[32, 64])",
]


def test_a_spec_runs_here_resumes_and_exports_the_winners_of_its_kernels(tmp_path: Path) -> None:
    seen: list[JobOutcome] = []
    run = tune_spec(SPEC, progress=seen.append)
    assert [o.job for o in run.outcomes] == [o.job for o in seen] == JOB_NAMES
    assert all(o.ok and o.device == "cpu" for o in run.outcomes), [o.error for o in run.outcomes]
    assert run.kernels == ["add_kernel", "adder"]

    again = tune_spec(SPEC)
    assert again.outcomes == [] and again.skipped == JOB_NAMES

    table = command.export(again, tmp_path / "table.json")
    assert sorted((e.kernel, e.inputs[0]) for e in table.entries if e.kernel == "add_kernel") == [
        ("add_kernel", 64),
        ("add_kernel", 512),
        ("add_kernel", 4096),
    ]
    assert sum(e.kernel == "adder" for e in table.entries) == 2

    fresh = tune_spec(SPEC, resume=False)
    assert [o.job for o in fresh.outcomes] == JOB_NAMES  # --fresh: run again, from the store this time


def test_a_new_process_runs_from_the_exported_table_with_tuning_forbidden(tmp_path: Path) -> None:
    tune_spec(SPEC)
    run = tune_spec(SPEC)
    command.export(run, tmp_path / "table.json")
    script = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(SPEC.parent)!r})
        import small_spec
        for job in small_spec.JOBS:
            job.run(torch.device("cpu"))
        print(small_spec.spec_add.last_tuning.note)
        print(small_spec.adder.last_selection.note)
        """
    )
    environment = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(tmp_path / "empty-cache"),
        "KERNELPICK_TABLES": str(tmp_path / "table.json"),
        "KERNELPICK_NO_TUNING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"from the deployment table {tmp_path / 'table.json'}"] * 2


def test_a_failing_job_is_reported_and_runs_again_next_time(tmp_path: Path) -> None:
    spec = tmp_path / "failing_spec.py"
    spec.write_text(
        "from kernelpick.jobs import Job\n"
        "def fail(device):\n    raise RuntimeError('this job fails on purpose')\n"
        "JOBS = [Job('fine', lambda device: None), Job('broken', fail)]\n"
    )
    run = tune_spec(spec)
    assert [(o.job, o.error) for o in run.failed] == [("broken", "RuntimeError: this job fails on purpose")]
    assert [o.job for o in tune_spec(spec).outcomes] == ["broken"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("X = 1\n", "defines no JOBS"),
        ("JOBS = []\n", "JOBS is empty"),
        ("JOBS = ['add']\n", r"JOBS\[0\] is str, not a Job"),
        (
            "from kernelpick.jobs import Job\nJOBS = [Job('a', print), Job('a', print)]\n",
            "two jobs are named 'a'",
        ),
    ],
)
def test_a_bad_spec_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    spec = tmp_path / f"spec_{abs(hash(content))}.py"
    spec.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_spec(spec)
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "missing.py")


def test_tensor_specs_name_their_dtype_and_size() -> None:
    assert str(tensor("bfloat16", 16, 4096)) == "bfloat16[16, 4096]"
    with pytest.raises(ConfigError, match="'half16' is not a torch dtype"):
        tensor("half16", 4)
    with pytest.raises(ConfigError, match="positive integers"):
        tensor("float16", 0)
    job = Job.select(lambda a: a.sum(), tensor("int32", 3), name="sum")
    assert job.name == "sum"


def test_what_a_job_stored_comes_back_as_data_and_replays_into_another_store(tmp_path: Path) -> None:
    load_spec(SPEC, reload=True)
    outcome = run_job(str(SPEC), "spec_add n=64")
    assert outcome.ok and outcome.kernels == ("add_kernel",)
    [saved] = outcome.rows
    assert len(saved["results"]) == 2 and saved["pick"] in {r["candidate"] for r in saved["results"]}
    json.dumps(outcome.rows)  # plain data: it crosses processes and machines as it is

    target = SQLiteStore(tmp_path / "target.sqlite3")
    assert replay(outcome.rows, target) == 2
    here = default_store()
    assert isinstance(here, SQLiteStore)
    assert {(r.key, r.candidate, r.picked) for r in target.rows()} == {
        (r.key, r.candidate, r.picked) for r in here.rows()
    }


@pytest.mark.slow
def test_jobs_run_on_a_real_local_ray_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    run = tune_spec(SPEC, ray_address="local")
    assert sorted(o.job for o in run.outcomes) == sorted(JOB_NAMES)
    assert all(o.ok for o in run.outcomes), [o.error for o in run.outcomes]
    assert run.kernels == ["add_kernel", "adder"]
    table = command.export(run, tmp_path / "table.json")
    assert len(table.entries) == 5
    assert json.loads((tmp_path / "table.json").read_text())["device"] == "cpu"


def test_export_holds_the_keys_the_specs_jobs_tuned_and_nothing_else_the_store_holds(tmp_path: Path) -> None:
    import torch
    import triton

    import kernelpick
    from kernelpick.demo import add_kernel

    # Tuned before, outside the spec: another key of the spec's kernel, and another kernel.
    other = kernelpick.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])(
        add_kernel
    )
    x = torch.randn(100)
    other[(7,)](x, x, torch.empty(100), 100)
    kernelpick.Selector("outsider", [kernelpick.extern(torch.add)]).tune(x, x)

    run = tune_spec(SPEC)
    table = command.export(run, tmp_path / "table.json")
    kernels = [e.kernel for e in table.entries]
    assert sorted(kernels) == ["add_kernel", "add_kernel", "add_kernel", "adder", "adder"]
    assert sorted(e.inputs[0] for e in table.entries if e.kernel == "add_kernel") == [64, 512, 4096]

"""compile/claims.py: the processes of one host compiling the same configs at once compile each once.

The compiles are real (Triton to a cubin for an explicit target, no GPU needed), in forked
compilers of two processes started together, as the device processes of `kernelpick tune --devices`
meet the configs of one kernel.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import triton
import triton.language as tl
from triton._C.libtriton import get_cache_invalidating_env_vars
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.cache import get_cache_key

from kernelpick.compile import forked as forked_module
from kernelpick.compile.claims import CLAIMS_FOLDER, claims_folder, compile_claim
from kernelpick.compile.forked import _ForkedExecutor

TARGET = GPUTarget("cuda", 90, 32)  # an H100's binaries, compiled on this CPU
BLOCKS = (64, 128, 256)


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2.0, mask=offsets < n)


def submit_compile(executor: _ForkedExecutor, block: int) -> None:
    """What Triton's `AsyncCompileMode` submits for one config: its compile, on a future keyed by
    Triton's cache key of it."""
    source = ASTSource(scale_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": block})
    backend = triton.compiler.make_backend(TARGET)
    options = backend.parse_options({"num_warps": 4})
    environment = get_cache_invalidating_env_vars()
    future = executor.submit(
        lambda: triton.compile(source, target=TARGET, options=options.__dict__, _env_vars=environment)
    )
    future._key = get_cache_key(source, backend, options, environment)  # type: ignore[attr-defined]


def compile_all(log_path: str, start: Any, claims: bool) -> None:
    """One process of the host: waits for the other, then compiles every block in forked compilers,
    which write one line per compile (`compiled` or `hit`: found in Triton's cache) to `log_path`."""

    def listener(**event: Any) -> None:
        with open(log_path, "a") as file:
            file.write(f"{os.getpid()} {'hit' if event['cache_hit'] else 'compiled'}\n")

    triton.knobs.compilation.listener = listener
    executor = _ForkedExecutor(workers=2, claims=claims_folder() if claims else None)
    for block in BLOCKS:
        submit_compile(executor, block)
    start.wait()
    executor.run()
    assert all(future.exception() is None for _, future in executor.jobs)


def run_two_processes(tmp_path: Path, claims: bool) -> list[str]:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(2)
    log_path = str(tmp_path / "compiles.log")
    processes = [context.Process(target=compile_all, args=(log_path, start, claims)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    return [line.split()[1] for line in Path(log_path).read_text().splitlines()]


@pytest.fixture
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return tmp_path / "triton"


def test_two_processes_compiling_the_same_configs_at_once_compile_each_once(
    tmp_path: Path, triton_cache: Path
) -> None:
    events = run_two_processes(tmp_path, claims=True)
    # Each config compiled by one process; the other loaded that binary from Triton's cache (as
    # each process then loads every config compiled in its forked compilers).
    assert events.count("compiled") == len(BLOCKS)
    assert events.count("hit") == 3 * len(BLOCKS)
    assert claims_folder() == triton_cache / CLAIMS_FOLDER
    assert len(list((triton_cache / CLAIMS_FOLDER).glob("*.lock"))) == len(BLOCKS)


def test_a_config_another_process_is_compiling_is_waited_for_and_counted(triton_cache: Path) -> None:
    context = multiprocessing.get_context("fork")
    executor = _ForkedExecutor(workers=1, claims=claims_folder())
    submit_compile(executor, 64)
    key = executor.jobs[0][1]._key  # type: ignore[attr-defined]
    held, go = context.Event(), context.Event()

    def hold() -> None:  # another process of the host, compiling this config for a second
        with compile_claim(claims_folder() or Path(), key, wait_s=10):
            held.set()
            go.wait(10)
            time.sleep(1.0)

    other = context.Process(target=hold)
    other.start()
    assert held.wait(10)
    go.set()
    executor.run()
    other.join(10)
    assert executor.jobs[0][1].exception() is None
    assert executor.phases["compile_claimed_elsewhere"] == 1
    assert 0.5 < executor.phases["compile_claim_wait"] < 10


def hold_forever(folder: str, key: str, held: Any) -> None:
    with compile_claim(Path(folder), key, wait_s=10):
        held.set()
        time.sleep(60)


def test_a_claim_whose_holder_is_killed_is_taken_at_once(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    held = context.Event()
    holder = context.Process(target=hold_forever, args=(str(tmp_path), "a compile", held))
    holder.start()
    assert held.wait(10)
    os.kill(holder.pid or 0, signal.SIGKILL)  # a compiler that crashed, or was killed at its timeout
    started = time.monotonic()
    with compile_claim(tmp_path, "a compile", wait_s=30) as claim:
        assert claim.held
    assert time.monotonic() - started < 5
    holder.join(10)


def test_a_claim_held_past_the_wait_is_given_up_and_the_waiter_compiles_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    context = multiprocessing.get_context("fork")
    held = context.Event()
    holder = context.Process(target=hold_forever, args=(str(tmp_path), "a compile", held))
    holder.start()
    try:
        assert held.wait(10)
        with caplog.at_level(logging.WARNING, logger="kernelpick.compile"):
            with compile_claim(tmp_path, "a compile", wait_s=0.5) as claim:
                assert not claim.held and claim.waited_s >= 0.5
        assert "compiling it here as well" in caplog.text
    finally:
        holder.kill()
        holder.join(10)


def test_a_forked_compiler_whose_claim_wait_runs_out_compiles_the_config_itself(
    triton_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = multiprocessing.get_context("fork")
    executor = _ForkedExecutor(workers=1, claims=claims_folder())  # no compile timeout: CLAIM_WAIT_S
    submit_compile(executor, 128)
    held = context.Event()
    holder = context.Process(
        target=hold_forever,
        args=(str(claims_folder()), executor.jobs[0][1]._key, held),  # type: ignore[attr-defined]
    )
    holder.start()
    monkeypatch.setattr(forked_module, "CLAIM_WAIT_S", 0.5)
    try:
        assert held.wait(10)
        started = time.monotonic()
        executor.run()  # the other process hangs holding the claim: not waited for past 0.5 s
        assert time.monotonic() - started < 30
        assert executor.jobs[0][1].exception() is None
    finally:
        holder.kill()
        holder.join(10)


def test_jobs_that_are_not_tritons_compile_unclaimed(tmp_path: Path) -> None:
    executor = _ForkedExecutor(workers=1, claims=tmp_path / "claims")
    future = executor.submit(lambda: "compiled")  # no Triton cache key on its future
    executor.run()
    assert future.result() == "compiled"
    assert not (tmp_path / "claims").exists()


def test_the_claims_folder_and_its_lock_files_are_private_under_a_permissive_umask(
    triton_cache: Path,
) -> None:
    before = os.umask(0o002)
    try:
        folder = claims_folder()
        assert folder is not None
        with compile_claim(folder, "a compile", wait_s=1) as claim:
            assert claim.held
    finally:
        os.umask(before)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # 0775: another user could plant lock files
    [lock] = folder.glob("*.lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_a_claims_folder_that_is_a_link_or_another_users_is_passed_over_with_one_warning(
    triton_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    triton_cache.mkdir()
    (triton_cache / CLAIMS_FOLDER).symlink_to(elsewhere)  # planted where the folder would be made
    with caplog.at_level(logging.WARNING, logger="kernelpick.compile"):
        assert claims_folder() is None  # compilers are started without claims
        for _ in range(2):
            with compile_claim(triton_cache / CLAIMS_FOLDER, "a compile", wait_s=1) as claim:
                assert not claim.held and claim.waited_s == 0.0
    assert list(elsewhere.iterdir()) == []  # no lock file made through the link
    [warning] = [r.getMessage() for r in caplog.records]
    assert "is a link" in warning and "compiles on its own" in warning
    if os.geteuid() != 0:
        pytest.skip("another user's folder can be made only as root")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 65534, 65534)  # nobody's
    with compile_claim(theirs, "a compile", wait_s=1) as claim:
        assert not claim.held
    assert list(theirs.iterdir()) == []

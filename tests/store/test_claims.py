"""store/claims.py: one process at a time holds a key (a lock file, or a Redis key with an expiry), and
the mark of a finished tuning says what it picked."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.errors import StoreError
from kernelpick.store import LayeredStore, RedisStore, SQLiteStore
from kernelpick.store.claims import Claims, Finished, claims_of
from kernelpick.store.redis import PREFIX
from tests.store.conftest import RedisServer, _free_port
from tests.store.samples import make_key


def sqlite_claims(folder: Path) -> Claims:
    claims = SQLiteStore(folder / "results.sqlite3").claims()
    assert claims_of(SQLiteStore(folder / "results.sqlite3")) is not None
    return claims


def test_a_held_key_is_not_claimed_again_until_let_go(tmp_path: Path) -> None:
    claims = sqlite_claims(tmp_path)
    held = claims.claim(make_key(), 1.0)
    assert held is not None
    started = time.monotonic()
    assert claims.claim(make_key(), 0.3) is None  # another process (or thread) waits, then gives up
    assert time.monotonic() - started >= 0.3
    assert claims.claim(make_key("other"), 0.0) is not None  # other keys are free
    held.release()
    assert claims.claim(make_key(), 0.0) is not None


def test_a_finished_tunings_mark_names_its_pick_and_a_release_leaves_none(tmp_path: Path) -> None:
    claims = sqlite_claims(tmp_path)
    assert claims.last(make_key()) is None
    held = claims.claim(make_key(), 1.0)
    assert held is not None
    held.release()
    assert claims.last(make_key()) is None  # let go unfinished (interrupted): no mark
    held = claims.claim(make_key(), 1.0)
    assert held is not None
    mark = Finished.new("c1")
    held.finish(mark)
    assert claims.last(make_key()) == mark
    again = claims.claim(make_key(), 0.0)  # finishing let go of the key
    assert again is not None
    again.finish(Finished.new(None))
    last = claims.last(make_key())
    assert last is not None and last.pick is None and last.token != mark.token


def test_a_mark_that_is_not_kernelpicks_counts_as_none(tmp_path: Path) -> None:
    claims = sqlite_claims(tmp_path)
    folder = tmp_path / "results.sqlite3.locks"
    folder.mkdir()
    (folder / f"{make_key().digest}.done").write_text("[1, 2")
    assert claims.last(make_key()) is None


#: Claims a key in the store at argv[1] (a SQLite file, or a Redis URL), says so, then sleeps.
HOLDER = """
import sys, time
from pathlib import Path
from kernelpick.store import RedisStore, SQLiteStore
from tests.store.samples import make_key
where = sys.argv[1]
store = RedisStore(where) if where.startswith("redis://") else SQLiteStore(Path(where))
held = store.claims().claim(make_key(), 5.0)
assert held is not None  # kept: a lock let go of by the garbage collector holds nothing
print("held", flush=True)
time.sleep(600)
"""


def hold(where: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "KERNELPICK_WAIT_TIMEOUT": "2"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, where], env=env, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_lock_file_is_let_go_the_moment_its_holder_is_killed(tmp_path: Path) -> None:
    holder = hold(str(tmp_path / "results.sqlite3"))
    claims = sqlite_claims(tmp_path)
    try:
        assert claims.claim(make_key(), 0.2) is None
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        assert claims.claim(make_key(), 30.0) is not None
        assert time.monotonic() - started < 2.0
    finally:
        holder.kill()


def test_redis_claims_hold_a_key_and_leave_a_mark(redis_url: str) -> None:
    claims = RedisStore(redis_url).claims()
    held = claims.claim(make_key(), 1.0)
    assert held is not None
    assert claims.claim(make_key(), 0.3) is None
    mark = Finished.new("c2")
    held.finish(mark)
    assert claims.last(make_key()) == mark
    assert claims.claim(make_key(), 0.0) is not None


def test_redis_claims_and_marks_are_kernelpicks_keys(redis_url: str, redis_server: RedisServer) -> None:
    held = RedisStore(redis_url).claims().claim(make_key(), 1.0)
    assert held is not None
    held.finish(Finished.new("c2"))
    keys = [key.decode() for key in redis_server.client().keys("*")]
    assert keys == [f"{PREFIX}tuned:{make_key().digest}"]  # the claim went with the finish


def test_a_redis_claim_outlives_its_lease_while_renewed_and_lapses_when_its_holder_dies(
    redis_url: str,
) -> None:
    with settings.override(wait_timeout_s=1.0):  # a lease of 1 s
        claims = RedisStore(redis_url).claims()
        held = claims.claim(make_key(), 1.0)
        assert held is not None
        time.sleep(2.5)  # renewed meanwhile
        assert claims.claim(make_key(), 0.0) is None
        held.release()
        again = claims.claim(make_key(), 0.0)
        assert again is not None
        again.release()

    holder = hold(redis_url)  # KERNELPICK_WAIT_TIMEOUT=2 there: a lease of 2 s
    try:
        assert claims.claim(make_key(), 0.0) is None
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        assert claims.claim(make_key(), 10.0) is not None
        assert time.monotonic() - started < 3.0
    finally:
        holder.kill()


def test_layered_claims_fail_at_once_while_redis_is_down(tmp_path: Path) -> None:
    store = LayeredStore(
        SQLiteStore(tmp_path / "results.sqlite3"), RedisStore(f"redis://127.0.0.1:{_free_port()}/0")
    )
    claims = store.claims()
    with pytest.raises(StoreError):
        claims.last(make_key())
    started = time.monotonic()
    with pytest.raises(StoreError, match="not answering"):
        claims.claim(make_key(), 5.0)  # the store is known to fail: not asked again for a while
    assert time.monotonic() - started < 0.5


# -- claims no one can hold for good (issue 40 item 5) ---------------------------------------------


@pytest.mark.parametrize("expiry", [None, 3600])
def test_a_planted_redis_claim_with_no_or_a_long_expiry_is_taken_over_at_once(
    redis_url: str, redis_server: RedisServer, expiry: int | None
) -> None:
    # No kernelpick sets such a claim (its leases are LEASE_S at most): one made every tuning of its
    # key wait KERNELPICK_WAIT_TIMEOUT, 600 s by default, every time.
    redis_server.client().set(f"{PREFIX}claim:{make_key().digest}", "planted", ex=expiry)
    started = time.monotonic()
    held = RedisStore(redis_url).claims().claim(make_key(), 30.0)
    assert held is not None and time.monotonic() - started < 1.0
    held.release()


def test_file_claims_are_private_and_follow_no_planted_link(tmp_path: Path) -> None:
    claims = sqlite_claims(tmp_path)
    folder = tmp_path / "results.sqlite3.locks"
    outside = tmp_path / "outside"
    outside.write_text(Finished("planted", "c9").to_json())
    folder.mkdir(mode=0o700)
    (folder / f"{make_key().digest}.done").symlink_to(outside)
    assert claims.last(make_key()) is None  # a link is no mark
    held = claims.claim(make_key(), 1.0)
    assert held is not None
    held.finish(Finished.new("c1"))  # replaces the link, never writes through it
    assert outside.read_text() == Finished("planted", "c9").to_json()
    last = claims.last(make_key())
    assert last is not None and last.pick == "c1"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for made in folder.iterdir():
        assert stat.S_IMODE(made.stat().st_mode) == 0o600, made

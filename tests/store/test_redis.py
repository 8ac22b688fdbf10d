"""store/redis.py: results shared through a real Redis server, checked when read, and never a failed call."""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.errors import StoreError
from kernelpick.store import (
    CandidateResult,
    LayeredStore,
    MemoryStore,
    RedisStore,
    SQLiteStore,
    default_store,
)
from kernelpick.store.redis import MAX_ENTRY_BYTES, PREFIX
from tests.store.conftest import RedisServer
from tests.store.samples import make_key, measured, ok


def layered(folder: Path, url: str, **options: Any) -> LayeredStore:
    """One machine: its own SQLite file in front of the shared Redis server."""
    return LayeredStore(SQLiteStore(folder / "results.sqlite3"), RedisStore(url, timeout_s=0.5), **options)


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "kernelpick.store" and r.levelno >= logging.WARNING
    ]


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        yield caplog


# -- sharing ----------------------------------------------------------------------------------


def test_saves_write_through_to_the_local_store_and_redis(tmp_path: Path, redis_url: str) -> None:
    store = layered(tmp_path, redis_url)
    store.save(make_key(), [measured("a", 2.0), measured("b", 1.0)], pick="b")
    assert set(store.local.load(make_key())) == {"a", "b"}
    shared, pick = RedisStore(redis_url).load_with_pick(make_key())
    assert {c: r.result.median_ms for c, r in shared.items()} == {"a": 2.0, "b": 1.0}
    assert pick == "b"
    assert all(r.result.from_store for r in shared.values())


def test_a_second_machine_reads_what_the_first_wrote_and_keeps_the_results_not_the_pick(
    tmp_path: Path, redis_url: str
) -> None:
    first = layered(tmp_path / "first", redis_url)
    first.save(make_key("mm", 64), [measured("a", 2.0), measured("b", 1.0)], pick="b")
    first.save(make_key("add", 8), [measured("a", 3.0)])

    second = layered(tmp_path / "second", redis_url)
    loaded = second.load(make_key("mm", 64))
    assert {c: r.result.median_ms for c, r in loaded.items()} == {"a": 2.0, "b": 1.0}
    assert all(r.result.from_store for r in loaded.values())
    assert loaded["a"].description == {"kwargs": {"BLOCK": 64}, "name": "a"}
    # The second machine's own file now holds them too, without Redis's pick: which candidate runs
    # there (and what its tables export) is what its own tunings pick.
    local = second.local
    assert isinstance(local, SQLiteStore)
    assert {(r.candidate, r.picked) for r in local.rows()} == {("a", False), ("b", False)}
    assert second.picked(make_key("mm", 64)) is None and second.remote.picked(make_key("mm", 64)) == "b"
    assert second.load(make_key("bmm", 64)) == {}


def test_local_results_win_and_only_what_redis_alone_has_is_copied(tmp_path: Path, redis_url: str) -> None:
    RedisStore(redis_url).save(make_key(), [measured("a", 5.0), measured("b", 1.0)], pick="b")
    store = layered(tmp_path, redis_url)
    store.local.save(make_key(), [measured("a", 2.0)])
    loaded = store.load(make_key())
    assert {c: r.result.median_ms for c, r in loaded.items()} == {"a": 2.0, "b": 1.0}
    assert {c: r.result.median_ms for c, r in store.local.load(make_key()).items()} == {"a": 2.0, "b": 1.0}


def test_entries_are_plain_json_under_a_versioned_prefix(redis_url: str, redis_server: RedisServer) -> None:
    key = make_key()
    RedisStore(redis_url).save(key, [measured("a", 2.0)], pick="a")
    client = redis_server.client()
    assert sorted(client.keys("*")) == sorted(
        f"{PREFIX}{name}".encode() for name in (f"results:{key.digest}", "keys", "picks")
    )
    entry = json.loads(client.hget(f"{PREFIX}results:{key.digest}", "a"))
    assert entry["candidate"] == "a" and entry["description"]["name"] == "a"
    assert BenchmarkResult.from_dict(entry["result"]).median_ms == 2.0
    assert client.hget(f"{PREFIX}keys", key.digest).decode() == key.canonical


def test_rows_list_every_stored_result_like_the_sqlite_store(tmp_path: Path, redis_url: str) -> None:
    remote, local = RedisStore(redis_url), SQLiteStore(tmp_path / "results.sqlite3")
    for store in (remote, local):
        store.save(make_key("mm", 64), [measured("a", 2.0), measured("b", 1.0)], pick="a")
        store.save(make_key("add", 8), [measured("a", 3.0)])

    def listed(rows: Iterator[Any]) -> list[tuple[object, ...]]:
        return [(r.key, r.candidate, r.result.median_ms, r.picked, r.description["name"]) for r in rows]

    assert listed(remote.rows()) == listed(local.rows())
    assert listed(remote.rows("add")) == [(make_key("add", 8), "a", 3.0, False, "a")]
    assert all(abs(r.created - time.time()) < 60 for r in remote.rows())


def test_default_store_layers_sqlite_under_redis_when_a_url_is_set(tmp_path: Path, redis_url: str) -> None:
    with settings.override(cache_dir=tmp_path / "cache", redis_url=redis_url, redis_timeout_s=0.25):
        store = default_store()
        assert isinstance(store, LayeredStore)
        assert isinstance(store.local, SQLiteStore)
        assert store.local.path == tmp_path / "cache" / "results.sqlite3"
        assert store.remote.url == redis_url
        assert default_store() is store
        store.save(make_key(), [measured("a", 1.0)])
    assert set(RedisStore(redis_url).load(make_key())) == {"a"}
    with settings.override(cache_dir=tmp_path / "cache"):
        assert isinstance(default_store(), SQLiteStore)
    with settings.override(cache=False, redis_url=redis_url):
        assert isinstance(default_store(), MemoryStore)  # KERNELPICK_CACHE=0: nothing kept, nor shared


def test_without_the_redis_package_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # what `import redis` meets where it is not installed
    with pytest.raises(StoreError, match=r"pip install 'kernelpick\[redis\]'"):
        RedisStore("redis://127.0.0.1:6379/0")


def test_a_url_that_is_not_a_redis_url_is_refused_naming_the_setting() -> None:
    with pytest.raises(StoreError, match=r"KERNELPICK_REDIS_URL='http://example.com' is not a Redis URL"):
        RedisStore("http://example.com")


# -- what is read is checked ------------------------------------------------------------------


class _Payload:
    """Unpickling this creates a file: what would happen if an entry were ever unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def _sound(candidate: str) -> dict[str, Any]:
    return {"candidate": candidate, "description": {}, "result": ok(1.0).to_dict(), "created": 1.0}


def _with(**changes: Any) -> bytes:
    return json.dumps({**_sound("x"), **changes}).encode()


MALFORMED = {
    "a pickle": None,  # made in the test: it names a path of the test's own
    "not JSON": b"{'candidate': 'x'",
    "not UTF-8": b'{"candidate": "\xff\xfe"}',
    "a JSON list": json.dumps([_sound("x")]).encode(),
    "filed under another candidate": json.dumps(_sound("y")).encode(),
    "description not an object": _with(description="BLOCK=64"),
    "unknown status": _with(result={"status": "fast", "timing": None, "message": ""}),
    "timing of the wrong type": _with(
        result={**ok(1.0).to_dict(), "timing": {**ok(1.0).to_dict()["timing"], "median_ms": "1"}}
    ),
    "ok without timing": _with(result={"status": "ok", "timing": None, "message": ""}),
    "no created time": _with(created=None),
    "over the size limit": _with(description={"padding": "x" * MAX_ENTRY_BYTES}),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_or_foreign_entry_is_ignored_with_one_warning(
    kind: str, tmp_path: Path, redis_url: str, redis_server: RedisServer, warnings: pytest.LogCaptureFixture
) -> None:
    key = make_key()
    marker = tmp_path / "unpickled"
    raw = MALFORMED[kind] or pickle.dumps(_Payload(marker))
    RedisStore(redis_url).save(key, [measured("good", 1.0)])
    redis_server.client().hset(f"{PREFIX}results:{key.digest}", "x", raw)

    store = layered(tmp_path, redis_url)
    assert set(store.load(key)) == {"good"}
    assert set(store.load(key)) == {"good"}
    assert [r.candidate for r in store.remote.rows()] == ["good"]
    [warning] = store_warnings(warnings)  # once, however often it is read
    assert f"{PREFIX}results:{key.digest}" in warning
    assert not marker.exists()
    assert set(store.local.load(key)) == {"good"}  # nothing of it reached the local store


def test_foreign_data_at_kernelpick_keys_is_ignored(
    tmp_path: Path, redis_url: str, redis_server: RedisServer, warnings: pytest.LogCaptureFixture
) -> None:
    sound, foreign, listed_wrongly = make_key("mm", 1), make_key("mm", 2), make_key("mm", 3)
    remote = RedisStore(redis_url)
    for key in (sound, listed_wrongly):
        remote.save(key, [measured("a", 1.0)], pick="a")
    client = redis_server.client()
    client.set(f"{PREFIX}results:{foreign.digest}", "a string where a hash belongs")
    client.hset(f"{PREFIX}picks", sound.digest, b"\xff\xfe")  # not a digest
    client.hset(f"{PREFIX}keys", listed_wrongly.digest, make_key("mm", 4).canonical)  # another key's JSON
    client.hset(f"{PREFIX}keys", "0" * 64, b"[[[[")

    store = layered(tmp_path, redis_url)
    assert store.load(foreign) == {}
    assert set(store.load(sound)) == {"a"}
    assert [(r.key, r.picked) for r in store.remote.rows()] == [(sound, False)]
    assert len(store_warnings(warnings)) == 4


def test_an_entry_over_the_size_limit_is_not_written(
    tmp_path: Path, redis_url: str, warnings: pytest.LogCaptureFixture
) -> None:
    huge = CandidateResult("huge", {"padding": "x" * MAX_ENTRY_BYTES}, ok(1.0))
    store = layered(tmp_path, redis_url)
    store.save(make_key(), [huge, measured("a", 1.0)])
    assert set(store.local.load(make_key())) == {"huge", "a"}  # the local store keeps it
    assert set(RedisStore(redis_url).load(make_key())) == {"a"}
    [warning] = store_warnings(warnings)
    assert "huge" in warning and "64 KiB" in warning


# -- outages ----------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens there once the probe closes


def _work_on(store: LayeredStore, keys: int = 5) -> None:
    for index in range(keys):
        store.save(make_key("mm", index), [measured("a", 1.0 + index)], pick="a")
        assert {c: r.result.median_ms for c, r in store.load(make_key("mm", index)).items()} == {
            "a": 1.0 + index
        }


@pytest.mark.parametrize("retry_after_s", [30.0, 0.0])  # 0: asked again at every call, and failing
def test_with_nothing_listening_calls_carry_on_locally_after_one_warning(
    tmp_path: Path, warnings: pytest.LogCaptureFixture, retry_after_s: float
) -> None:
    store = layered(tmp_path, f"redis://:secret@127.0.0.1:{_closed_port()}/0", retry_after_s=retry_after_s)
    _work_on(store)
    assert len(list(store.local.rows())) == 5  # type: ignore[attr-defined]
    [warning] = store_warnings(warnings)
    assert "local store alone" in warning and "127.0.0.1" in warning
    assert "secret" not in warning  # a password in the URL stays out of logs


@pytest.mark.parametrize(
    "url",
    [
        "redis://:secret@127.0.0.1:{port}/0",
        "redis://user:secret@127.0.0.1:{port}/0",
        "redis://127.0.0.1:{port}/0?password=secret",
        "redis://127.0.0.1:{port}/0?db=0&password=secret&socket_keepalive=true",
    ],
)
def test_a_password_in_the_url_or_its_query_stays_out_of_errors(url: str) -> None:
    remote = RedisStore(url.format(port=_closed_port()), timeout_s=0.2)
    with pytest.raises(StoreError) as raised:
        remote.load(make_key())
    assert "secret" not in str(raised.value) and "secret" not in remote.url
    assert "127.0.0.1" in str(raised.value)


def test_a_server_that_does_not_answer_costs_one_timeout_then_is_left_alone(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        store = LayeredStore(
            SQLiteStore(tmp_path / "results.sqlite3"),
            RedisStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout_s=0.3),
        )
        start = time.monotonic()
        store.save(make_key(), [measured("a", 1.0)])
        assert 0.25 < time.monotonic() - start < 5.0  # it waited out the timeout, once
        _work_on(store, keys=10)
        silent.setblocking(False)
        connections = []
        with contextlib.suppress(BlockingIOError):
            while True:
                connections.append(silent.accept()[0])
        for connection in connections:
            connection.close()
    assert len(connections) == 1  # the next 20 calls did not try the server again
    [warning] = store_warnings(warnings)
    assert "Timeout" in warning


def test_a_server_gone_mid_use_is_asked_again_later_and_sharing_resumes(
    tmp_path: Path, own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = layered(tmp_path / "machine", own_redis_server.url, retry_after_s=0.5)
    with caplog.at_level(logging.INFO, logger="kernelpick.store"):
        store.save(make_key("mm", 0), [measured("a", 1.0)])
        own_redis_server.kill()
        _work_on(store)
        assert len(store_warnings(caplog)) == 1
        again = RedisServer(own_redis_server.folder, port=own_redis_server.port)
        try:
            time.sleep(0.6)
            store.save(make_key("mm", 9), [measured("b", 2.0)], pick="b")
            assert RedisStore(again.url).load_with_pick(make_key("mm", 9))[1] == "b"
        finally:
            again.kill()
    assert len(store_warnings(caplog)) == 1
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_redis_store_alone_raises_a_store_error_when_the_server_is_gone() -> None:
    remote = RedisStore(f"redis://127.0.0.1:{_closed_port()}/0", timeout_s=0.5)
    with pytest.raises(StoreError, match=r"Redis at redis://127\.0\.0\.1:\d+/0 failed to read"):
        remote.load(make_key())
    with pytest.raises(StoreError, match="failed to list the stored keys"):
        list(remote.rows())


def test_what_was_saved_while_the_server_was_gone_is_sent_when_it_answers_again(
    tmp_path: Path, own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = layered(tmp_path / "machine", own_redis_server.url, retry_after_s=0.5)
    store.save(make_key("mm", 0), [measured("a", 1.0)], pick="a")
    own_redis_server.kill()
    _work_on(store)  # keys 0..4, saved locally only
    store.save(make_key("mm", 3), [measured("b", 0.5)], pick="b")  # one key saved twice meanwhile
    assert store.unsent == 5
    again = RedisServer(own_redis_server.folder, port=own_redis_server.port)  # empty: it kept nothing
    try:
        time.sleep(0.6)
        with caplog.at_level(logging.INFO, logger="kernelpick.store"):
            store.load(make_key("mm", 0))  # any call that reaches the server sends the backlog
        assert store.unsent == 0
        assert any("sent 5 tunings saved while Redis" in r.getMessage() for r in caplog.records)
        shared = RedisStore(again.url)
        for index in range(5):
            results, pick = shared.load_with_pick(make_key("mm", index))
            assert results["a"].result.median_ms == 1.0 + index
        results, pick = shared.load_with_pick(make_key("mm", 3))
        assert set(results) == {"a", "b"} and pick == "b"  # both saves of key 3, the later pick
    finally:
        again.kill()


def test_a_save_that_reaches_the_server_first_is_not_overwritten_by_the_older_one_kept(
    tmp_path: Path, own_redis_server: RedisServer
) -> None:
    store = layered(tmp_path / "machine", own_redis_server.url, retry_after_s=0.5)
    own_redis_server.kill()
    store.save(make_key("mm", 0), [measured("a", 1.0), measured("b", 2.0)], pick="a")  # kept
    again = RedisServer(own_redis_server.folder, port=own_redis_server.port)
    try:
        time.sleep(0.6)
        store.save(make_key("mm", 0), [measured("a", 3.0)], pick="b")  # a timed again: b wins now
        assert store.unsent == 0
        results, pick = RedisStore(again.url).load_with_pick(make_key("mm", 0))
        assert results["a"].result.median_ms == 3.0 and results["b"].result.median_ms == 2.0
        assert pick == "b"
    finally:
        again.kill()


def test_a_backlog_that_fails_again_is_kept_for_the_next_time() -> None:
    remote = RedisStore(f"redis://127.0.0.1:{_closed_port()}/0", timeout_s=0.2)
    store = LayeredStore(MemoryStore(), remote, retry_after_s=0.0)
    for index in range(3):
        store.save(make_key("mm", index), [measured("a", 1.0)])
    with pytest.raises(StoreError):
        store._send_kept()  # the server is still gone: nothing is lost
    assert store.unsent == 3


def test_a_backlog_cut_short_stays_older_than_what_was_saved_meanwhile() -> None:
    class FailsOnKey1:  # a remote store that fails on key 1, while another thread saves keys 2 and 3
        url = "redis://fake"

        def save(self, key: Any, results: Any, *, pick: Any = None) -> None:
            if key == make_key("mm", 1):
                store._keep(make_key("mm", 2), [measured("a", 9.0)], None)
                store._keep(make_key("mm", 3), [measured("a", 3.0)], None)
                raise StoreError("gone")

    store = LayeredStore(MemoryStore(), FailsOnKey1(), retry_after_s=0.0)  # type: ignore[arg-type]
    for index in range(3):
        store._keep(make_key("mm", index), [measured("a", float(index))], "a")
    with pytest.raises(StoreError):
        store._send_kept()
    assert [key for key, _, _ in store._backlog.values()] == [make_key("mm", i) for i in (1, 2, 3)]
    _, kept, pick = store._backlog[make_key("mm", 2).digest]
    assert kept["a"].result.median_ms == 9.0 and pick == "a"  # the later save wins, the pick stays


def test_the_backlog_keeps_the_latest_keys_up_to_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpick.store import layered as module

    monkeypatch.setattr(module, "BACKLOG_KEYS", 3)
    remote = RedisStore(f"redis://127.0.0.1:{_closed_port()}/0", timeout_s=0.2)
    store = LayeredStore(MemoryStore(), remote, retry_after_s=30.0)
    for index in range(5):
        store.save(make_key("mm", index), [measured("a", 1.0)])
    assert store.unsent == 3
    assert [key.digest for key, _, _ in store._backlog.values()] == [
        make_key("mm", i).digest for i in (2, 3, 4)
    ]
    assert len(store.local.load(make_key("mm", 0))) == 1  # the oldest only go unshared: kept locally


def test_an_outage_is_not_worth_a_warning_where_the_local_store_had_every_result(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    local = SQLiteStore(tmp_path / "results.sqlite3")
    for index in range(3):  # what an earlier process tuned and stored here
        local.save(make_key("mm", index), [measured("a", 1.0)], pick="a")
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    for _ in range(2):  # two processes that find every result they need here, Redis down
        store = LayeredStore(local, RedisStore(url, timeout_s=0.2), retry_after_s=0.0)
        for index in range(3):
            assert set(store.load(make_key("mm", index))) == {"a"}
    assert store_warnings(warnings) == []
    # A key the local store knows nothing of: Redis might have had it, and now it matters.
    store.load(make_key("mm", 7))
    store.save(make_key("mm", 7), [measured("a", 2.0)], pick="a")
    [warning] = store_warnings(warnings)  # once for its cause, however many calls met it
    assert "local store alone" in warning and "ConnectionError" in warning


# -- signed rows (KERNELPICK_STORE_KEY_FILE) --------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "store.key"
    path.write_text("0123456789abcdef0123456789abcdef\n")
    return path


def test_with_a_secret_only_rows_and_picks_signed_with_it_are_read(
    tmp_path: Path,
    redis_url: str,
    redis_server: RedisServer,
    secret: Path,
    warnings: pytest.LogCaptureFixture,
) -> None:
    signed = RedisStore(redis_url, key_file=secret)
    signed.save(make_key("mm", 1), [measured("a", 2.0), measured("b", 1.0)], pick="b")
    assert set(signed.load(make_key("mm", 1))) == {"a", "b"} and signed.picked(make_key("mm", 1)) == "b"
    assert RedisStore(redis_url).picked(make_key("mm", 1)) == "b"  # a reader without it reads them too

    RedisStore(redis_url).save(make_key("mm", 2), [measured("a", 0.5)], pick="a")  # unsigned
    other = tmp_path / "other.key"
    other.write_text("another secret, not the writers'")
    RedisStore(redis_url, key_file=other).save(make_key("mm", 3), [measured("a", 0.5)], pick="a")
    client = redis_server.client()  # a row signed for key 1, copied under key 4
    client.hset(
        f"{PREFIX}results:{make_key('mm', 4).digest}",
        "b",
        client.hget(f"{PREFIX}results:{make_key('mm', 1).digest}", "b"),
    )
    for n in (2, 3, 4):
        assert signed.load(make_key("mm", n)) == {} and signed.picked(make_key("mm", n)) is None
    refused = [
        w for w in store_warnings(warnings) if "not signed with the secret of KERNELPICK_STORE_KEY_FILE" in w
    ]
    assert len(refused) == 5  # the rows of keys 2, 3 and 4, the picks of keys 2 and 3


def test_a_secret_file_that_cannot_serve_is_refused_naming_the_setting(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_text("guessable\n")
    with pytest.raises(StoreError, match=r"KERNELPICK_STORE_KEY_FILE=.*short.key holds 9 bytes"):
        RedisStore("redis://127.0.0.1:1/0", key_file=short)
    with pytest.raises(StoreError, match=r"KERNELPICK_STORE_KEY_FILE=.*cannot be read"):
        RedisStore("redis://127.0.0.1:1/0", key_file=tmp_path / "missing.key")

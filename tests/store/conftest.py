"""Store test set-up: real redis-server processes on loopback, and a SQLite store with garbage in it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.samples import write_damaged_store


class RedisServer:
    """A `redis-server` on a loopback port, keeping nothing on disk, in a folder of its own."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server): Redis tests skip")
        self.folder = folder
        self.port = port or _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = folder / f"redis-{self.port}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                cwd=folder,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_it_answers()

    def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + 15.0
        while True:
            try:
                if self.client().ping():
                    return
            except Exception as error:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    pytest.skip(f"redis-server did not start ({error}): {self.log.read_text()[-500:]}")
            time.sleep(0.02)

    def client(self) -> Any:
        """A redis-py client of this server (bytes in, bytes out)."""
        redis = pytest.importorskip("redis")
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def kill(self) -> None:
        """SIGKILL, like a crash or an unplugged machine: no goodbye to its clients."""
        self.process.kill()
        self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the session (tests that kill a server start their own)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, emptied for this test."""
    redis_server.client().flushall()
    return redis_server.url


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, to stop or kill."""
    server = RedisServer(tmp_path)
    yield server
    if server.process.poll() is None:
        server.kill()


@pytest.fixture
def damaged_store(tmp_path: Path) -> Path:
    """The path of a store of 2,000 results with garbage over pages in the middle of its file."""
    path = tmp_path / "damaged" / "results.sqlite3"
    write_damaged_store(path)
    return path

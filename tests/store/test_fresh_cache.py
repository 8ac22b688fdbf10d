"""store/default.py's `kernelpick.fresh_cache()`: a temporary store and template cache for users' tests."""

from __future__ import annotations

import threading

import torch

import kernelpick
from kernelpick import Config, Selector, extern, settings, template
from kernelpick.store.default import default_store, default_store_path
from kernelpick.store.sqlite import SQLiteStore
from tests.select.test_template_choice import SCALE, double


def scale_selector() -> Selector:
    return Selector(
        "scale", [extern(double), template(SCALE, configs=[Config({"BLOCK": 16})], constants={"FACTOR": 2.0})]
    )


def test_tuning_inside_measures_afresh_and_leaves_nothing_behind() -> None:
    outer = default_store_path()
    scale_selector().tune(torch.randn(32))  # stored in the user's (here: the test's) store
    with kernelpick.fresh_cache() as folder:
        assert settings.cache_dir() == folder and default_store_path() == folder / "results.sqlite3"
        record = scale_selector().tune(torch.randn(32))
        assert not record.from_store  # the outer store's results are not seen
        assert isinstance(default_store(), SQLiteStore) and default_store_path().is_file()
        assert any((folder / "templates").iterdir())  # rendered modules are cached inside too
        assert scale_selector().tune(torch.randn(32)).from_store  # and reused within the block
    assert not folder.exists()
    assert default_store_path() == outer
    assert scale_selector().tune(torch.randn(32)).from_store  # the outer store is untouched


def test_the_store_and_redis_are_on_inside_whatever_the_settings_say() -> None:
    with settings.override(cache=False, redis_url="redis://127.0.0.1:1/0"):
        with kernelpick.fresh_cache():
            assert settings.current().cache and settings.current().redis_url == ""
            assert isinstance(default_store(), SQLiteStore)
        assert not settings.current().cache


def test_each_block_and_each_thread_has_its_own_cache() -> None:
    seen: dict[str, object] = {}

    def other() -> None:
        with kernelpick.fresh_cache() as folder:
            seen["other"] = folder

    with kernelpick.fresh_cache() as first:
        with kernelpick.fresh_cache() as inner:
            assert inner != first and settings.cache_dir() == inner
        assert settings.cache_dir() == first
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen["other"] != first and settings.cache_dir() == first


def test_worker_processes_get_the_temporary_folder() -> None:
    from kernelpick.workers.plan import worker_settings

    with kernelpick.fresh_cache() as folder:
        assert worker_settings()["cache_dir"] == str(folder)  # what a worker's requests carry
    assert worker_settings()["cache_dir"] != str(folder)


def test_deployment_tables_still_apply_inside(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kernelpick.store.deploy import tables
    from tests.store.test_deploy import add, tuned_table

    kernelpick.load_table(tuned_table(tmp_path, 128))
    try:
        with kernelpick.fresh_cache(), settings.override(no_tuning=True):
            record = add(128).last_tuning  # no tuning allowed: the table's winner runs
        assert record is not None and record.note.startswith("from the deployment table")
    finally:
        tables().clear()

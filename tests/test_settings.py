"""settings.py: every KERNELPICK_* variable parsed, checked and scoped as documented."""

from __future__ import annotations

import logging
import os
from dataclasses import fields
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.errors import CacheDirError, KernelpickError, SettingsError
from kernelpick.settings import Settings, from_environ


def test_empty_environment_gives_the_declared_defaults() -> None:
    assert from_environ({}) == Settings()
    assert Settings().cache is True
    assert Settings().cache_dir is None


def test_unrelated_variables_are_ignored() -> None:
    assert from_environ({"HOME": "/nowhere", "KERNELPICK": "1"}) == Settings()


def test_a_misspelt_variable_is_warned_of_once_with_the_closest_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kernelpick.settings"):
        assert from_environ({"KERNELPICK_ISOLTE": "on"}) == Settings()
        from_environ({"KERNELPICK_ISOLTE": "on"})
        from_environ({"KERNELPICK_NOTHING_LIKE_IT_AT_ALL": "1"})
    assert [r.getMessage() for r in caplog.records] == [
        "KERNELPICK_ISOLTE is set but is not a kernelpick setting, so it is ignored: "
        "did you mean KERNELPICK_ISOLATE?",
        "KERNELPICK_NOTHING_LIKE_IT_AT_ALL is set but is not a kernelpick setting, so it is ignored: "
        "`kernelpick settings` lists the settings",
    ]


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "Yes", "on", " on "])
def test_boolean_true_spellings(text: str) -> None:
    assert from_environ({"KERNELPICK_PRINT": text}).print_tables is True


@pytest.mark.parametrize("text", ["0", "false", "False", "no", "OFF", ""])
def test_boolean_false_spellings(text: str) -> None:
    assert from_environ({"KERNELPICK_CACHE": text}).cache is False


def test_bad_boolean_names_the_variable_and_the_accepted_spellings() -> None:
    with pytest.raises(SettingsError, match=r"KERNELPICK_CACHE='maybe'.*1/0, true/false"):
        from_environ({"KERNELPICK_CACHE": "maybe"})


def test_integers_and_numbers_are_converted() -> None:
    parsed = from_environ(
        {"KERNELPICK_COMPILE_WORKERS": "3", "KERNELPICK_REP_MS": "2.5", "KERNELPICK_MAX_REPS": "7"}
    )
    assert parsed.compile_workers == 3 and isinstance(parsed.compile_workers, int)
    assert parsed.rep_ms == 2.5
    assert parsed.max_reps == 7


@pytest.mark.parametrize(
    ("env", "text", "expected"),
    [
        ("KERNELPICK_MIN_REPS", "lots", "is not an integer"),
        ("KERNELPICK_MIN_REPS", "2.5", "is not an integer"),
        ("KERNELPICK_WARMUP_MS", "fast", "is not a number"),
        ("KERNELPICK_CONFIRM_TOP", "-1", "must not be negative"),
        ("KERNELPICK_CONFIRM_REP_MS", "-0.5", "must not be negative"),
    ],
)
def test_bad_numbers_name_the_variable(env: str, text: str, expected: str) -> None:
    with pytest.raises(SettingsError, match=f"{env}={text!r} {expected}"):
        from_environ({env: text})


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_non_finite_times_are_rejected(text: str) -> None:
    # A rep or warm-up time of nan or inf cannot be turned into a number of runs.
    with pytest.raises(SettingsError, match="KERNELPICK_REP_MS"):
        from_environ({"KERNELPICK_REP_MS": text})


def test_choices_are_checked() -> None:
    assert from_environ({"KERNELPICK_COMPILE_MODE": "process"}).compile_mode == "process"
    assert from_environ({"KERNELPICK_PROGRESS": "off"}).progress == "off"
    with pytest.raises(
        SettingsError, match=r"KERNELPICK_COMPILE_MODE='fork' is not one of 'thread', 'process'"
    ):
        from_environ({"KERNELPICK_COMPILE_MODE": "fork"})


def test_cache_dir_is_an_optional_path(tmp_path: Path) -> None:
    assert from_environ({"KERNELPICK_CACHE_DIR": str(tmp_path)}).cache_dir == tmp_path
    assert from_environ({"KERNELPICK_CACHE_DIR": ""}).cache_dir is None
    home = from_environ({"KERNELPICK_CACHE_DIR": "~/kp"}).cache_dir
    assert home == Path("~/kp").expanduser()


def test_settings_errors_are_library_errors_and_value_errors() -> None:
    with pytest.raises(KernelpickError):
        from_environ({"KERNELPICK_MAX_REPS": "x"})
    with pytest.raises(ValueError):
        from_environ({"KERNELPICK_MAX_REPS": "x"})


def test_override_converts_and_checks_values_like_the_environment(tmp_path: Path) -> None:
    with settings.override(cache_dir=str(tmp_path), print_tables="yes", rep_ms="3") as scoped:
        assert scoped.cache_dir == tmp_path
        assert scoped.print_tables is True
        assert scoped.rep_ms == 3.0
    with pytest.raises(SettingsError, match="KERNELPICK_COMPILE_MODE"):
        with settings.override(compile_mode="fork"):
            pass


def test_override_is_scoped_and_nests() -> None:
    outside = settings.current()
    with settings.override(max_reps=50) as outer:
        assert settings.current() is outer
        with settings.override(min_reps=2) as inner:
            assert (inner.max_reps, inner.min_reps) == (50, 2)
            assert settings.current() is inner
        assert settings.current() is outer
        assert settings.current().min_reps == outside.min_reps
    assert settings.current() == outside


def test_override_is_undone_when_the_block_raises() -> None:
    outside = settings.current()
    with pytest.raises(RuntimeError), settings.override(confirm_top=9):
        raise RuntimeError("boom")
    assert settings.current() == outside


def test_override_of_an_unknown_setting_lists_the_known_ones() -> None:
    with pytest.raises(SettingsError, match=r"unknown settings \['cache_size'\]; known: .*'rep_ms'"):
        with settings.override(cache_size=1):
            pass


def test_reload_reads_the_environment_again(monkeypatch: pytest.MonkeyPatch) -> None:
    token = settings._override.set(None)  # step outside the per-test override of conftest.py
    try:
        monkeypatch.setenv("KERNELPICK_MAX_REPS", "17")
        assert settings.reload().max_reps == 17
        monkeypatch.setenv("KERNELPICK_MAX_REPS", "18")
        assert settings.current().max_reps == 17  # read once, until reloaded
        assert settings.reload().max_reps == 18
        monkeypatch.setenv("KERNELPICK_MAX_REPS", "many")
        with pytest.raises(SettingsError, match="KERNELPICK_MAX_REPS"):
            settings.reload()
    finally:
        monkeypatch.delenv("KERNELPICK_MAX_REPS")
        settings.reload()
        settings._override.reset(token)


def test_read_each_reports_every_bad_value_instead_of_raising_the_first() -> None:
    found = {
        name: (value, error)
        for name, value, error in settings.read_each(
            {"KERNELPICK_PRINT": "maybe", "KERNELPICK_MAX_REPS": "many", "KERNELPICK_REP_MS": "2.5"}
        )
    }
    assert list(found) == [f.name for f in fields(Settings)]
    value, error = found["print_tables"]
    assert value == "maybe" and isinstance(error, SettingsError) and "KERNELPICK_PRINT='maybe'" in str(error)
    assert found["max_reps"][1] is not None
    assert found["rep_ms"] == (2.5, None) and found["cache"] == (True, None)


def test_describe_lists_every_variable_with_its_default_and_meaning() -> None:
    described = settings.describe()
    assert [row[0] for row in described] == [f.metadata["env"] for f in fields(Settings)]
    assert all(name.startswith("KERNELPICK_") and doc for name, _, doc in described)
    confirm_top = Settings.__dataclass_fields__["confirm_top"]
    assert ("KERNELPICK_CONFIRM_TOP", repr(Settings().confirm_top), confirm_top.metadata["doc"]) in described


def test_cache_dir_creates_the_overridden_folder(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    with settings.override(cache_dir=target):
        assert settings.cache_dir() == target
    assert target.is_dir()


def test_cache_dir_defaults_to_the_user_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda name, appauthor: str(tmp_path / name))
    with settings.override(cache_dir=None):
        assert settings.cache_dir() == tmp_path / "kernelpick"
    assert (tmp_path / "kernelpick").is_dir()


def test_without_platformdirs_the_cache_dir_is_the_xdg_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GPU machines' images lack platformdirs: the user's call must not fail on its import.
    import sys

    monkeypatch.setitem(sys.modules, "platformdirs", None)  # `import platformdirs` raises ImportError
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with settings.override(cache_dir=None):
        assert settings.cache_dir() == tmp_path / "xdg" / "kernelpick"


def test_a_cache_dir_that_is_a_file_is_a_named_error(tmp_path: Path) -> None:
    file = tmp_path / "not-a-folder"
    file.write_text("")
    with settings.override(cache_dir=file), pytest.raises(CacheDirError) as raised:
        settings.cache_dir()
    message = str(raised.value)
    assert (
        f"KERNELPICK_CACHE_DIR={file} cannot be used" in message and "it is a file, not a folder" in message
    )
    assert isinstance(raised.value, OSError) and raised.value.path == str(file)
    with settings.override(cache_dir=file / "below"), pytest.raises(CacheDirError, match=f"{file} is a file"):
        settings.cache_dir()


def kernelpick_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("kernelpick") and r.levelno >= logging.WARNING
    ]


def test_an_unusable_cache_dir_is_warned_of_once_and_a_temporary_folder_stands_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "not-a-folder"
    file.write_text("")
    with settings.override(cache_dir=file), caplog.at_level(logging.WARNING):
        assert settings.usable_cache_dir() is None
        assert settings.usable_cache_dir() is None
        folder = settings.cache_dir_or_temporary()
        assert folder.is_dir() and settings.cache_dir_or_temporary() == folder
        (folder / "written").write_text("a rendered kernel")
    [warning] = kernelpick_warnings(caplog)
    assert f"KERNELPICK_CACHE_DIR={file}" in warning and "it is a file, not a folder" in warning
    assert "in memory for this process only" in warning
    assert settings.usable_cache_dir() == settings.cache_dir()  # the test's own folder: usable, no warning
    assert settings.cache_dir_or_temporary() == settings.cache_dir()


def test_compile_workers_zero_means_one_per_cpu() -> None:
    with settings.override(compile_workers=0):
        assert settings.compile_workers() == (os.cpu_count() or 1)
    with settings.override(compile_workers=3):
        assert settings.compile_workers() == 3


@pytest.mark.parametrize(
    ("spelling", "meaning"),
    [
        ("0", "off"),
        ("1", "on"),
        ("false", "off"),
        ("TRUE", "on"),
        ("no", "off"),
        ("yes", "on"),
        ("auto", "auto"),
    ],
)
def test_toggles_take_the_usual_boolean_spellings(spelling: str, meaning: str) -> None:
    assert settings.from_environ({"KERNELPICK_ISOLATE": spelling}).isolate == meaning


def test_a_bad_toggle_names_the_variable_and_the_spellings() -> None:
    with pytest.raises(
        SettingsError, match=r"KERNELPICK_ISOLATE='maybe' is not one of 'auto', 'on', 'off', or a boolean"
    ):
        settings.from_environ({"KERNELPICK_ISOLATE": "maybe"})


def test_the_timer_is_a_setting() -> None:
    assert settings.from_environ({}).timer == "auto"
    assert settings.from_environ({"KERNELPICK_TIMER": "profiler"}).timer == "profiler"
    with pytest.raises(SettingsError, match="KERNELPICK_TIMER"):
        settings.from_environ({"KERNELPICK_TIMER": "stopwatch"})


def test_as_environment_gives_another_process_the_same_settings(tmp_path: Path) -> None:
    with settings.override(cache_dir=tmp_path, no_tuning=True, rep_ms=5, tables="a.json:b.json"):
        environment = settings.as_environment()
        assert settings.from_environ(environment) == settings.current()
    assert environment["KERNELPICK_NO_TUNING"] == "1"
    assert "KERNELPICK_WARMUP_MS" not in environment  # defaults are left out


def test_adopt_environment_sets_variables_and_reads_the_settings_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNELPICK_REP_MS", "10")  # registered: restored when the test ends
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    settings.adopt_environment({"KERNELPICK_REP_MS": "3", "CUDA_VISIBLE_DEVICES": "1"})
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert settings.from_environ().rep_ms == 3.0
    monkeypatch.undo()
    assert settings.reload().rep_ms != 3.0  # later tests see the environment as it was


@pytest.mark.parametrize(
    ("visible", "index", "child"),
    [
        (None, 1, "1"),  # every GPU visible: the index is the GPU's
        ("", 0, "0"),
        ("1", 0, "1"),  # a process of `kernelpick tune --devices 1`, or a Ray actor on GPU 1
        ("2,3", 1, "3"),
        (" 4, 6 ", 1, "6"),
        ("GPU-8a1f,GPU-77c2", 1, "GPU-77c2"),  # GPUs named by UUID stay named so
        ("MIG-1c2d", 0, "MIG-1c2d"),
        ("3", 2, "2"),  # not a GPU this process sees: left to CUDA, which says so
    ],
)
def test_a_child_is_told_the_gpu_as_the_machine_numbers_it(
    monkeypatch: pytest.MonkeyPatch, visible: str | None, index: int, child: str
) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert settings.visible_device(index) == child

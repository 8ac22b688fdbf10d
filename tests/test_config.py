"""config.py: configs compare, hash, convert and serialize the same way in every process."""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl

from kernelpick.config import Config
from kernelpick.errors import ConfigError


def test_equal_configs_are_equal_and_hash_alike_whatever_their_pre_hook() -> None:
    a = Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=8, pre_hook=lambda named: None)
    b = Config({"BLOCK_N": 32, "BLOCK_M": 64}, num_warps=8)  # kwargs order does not matter
    assert a == b
    assert hash(a) == hash(b)
    assert {a: "first"}[b] == "first"
    assert len({a, b}) == 1


def test_defaults_are_tritons() -> None:
    assert Config({"BLOCK": 1}) == Config({"BLOCK": 1}, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None)
    assert Config({"BLOCK": 1}).options() == {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}


@pytest.mark.parametrize(
    "other",
    [
        Config({"BLOCK": 128}),
        Config({"BLOCK": 64}, num_warps=8),
        Config({"BLOCK": 64}, num_stages=4),
        Config({"BLOCK": 64}, num_ctas=2),
        Config({"BLOCK": 64}, maxnreg=128),
        Config({"BLOCK": 64, "GROUP": 8}),
        Config({"BLOCK": True}),
    ],
)
def test_any_difference_makes_another_config(other: Config) -> None:
    base = Config({"BLOCK": 64})
    assert base != other
    assert base.digest != other.digest


def test_bool_and_int_meta_parameters_differ() -> None:
    assert Config({"EVEN": True}) != Config({"EVEN": 1})


def test_kwargs_are_copied_and_frozen() -> None:
    kwargs = {"BLOCK": 64}
    config = Config(kwargs)
    kwargs["BLOCK"] = 128
    assert config.kwargs["BLOCK"] == 64
    with pytest.raises(TypeError):
        config.kwargs["BLOCK"] = 32  # type: ignore[index]


def test_config_is_not_equal_to_other_objects() -> None:
    assert Config({"BLOCK": 64}) != {"BLOCK": 64}
    assert Config({"BLOCK": 64}) != "BLOCK=64"


def test_a_config_equals_its_triton_twin_both_ways() -> None:
    # A tuned kernel's best_config is the config as the user gave it: code comparing it with the
    # configs it listed, or with kernelpick's, works either way round.
    assert Config({"BLOCK": 64}, num_warps=8) == triton.Config({"BLOCK": 64}, num_warps=8)
    assert triton.Config({"BLOCK": 64}, num_warps=8) == Config({"BLOCK": 64}, num_warps=8)
    assert Config({"BLOCK": 64}) != triton.Config({"BLOCK": 64}, num_warps=8)
    assert triton.Config({"BLOCK": 64}, maxnreg=128) == Config({"BLOCK": 64}, maxnreg=128)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"num_warps": 0}, "num_warps"),
        ({"num_warps": -4}, "num_warps"),
        ({"num_warps": "4"}, "num_warps"),
        ({"num_warps": 4.0}, "num_warps"),
        ({"num_warps": True}, "num_warps"),
        ({"num_stages": 0}, "num_stages"),
        ({"maxnreg": 0}, "maxnreg"),
    ],
)
def test_bad_options_are_rejected_by_name(options: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError, match=f"Config {name} must be a positive integer, got"):
        Config({"BLOCK": 64}, **options)  # type: ignore[arg-type]


def test_kwargs_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="mapping of meta-parameters, got list"):
        Config([("BLOCK", 64)])  # type: ignore[arg-type]


def test_triton_config_is_converted_with_every_option_and_its_pre_hook() -> None:
    def hook(named: dict[str, object]) -> None:
        pass

    original = triton.Config({"BLOCK": 128}, num_warps=2, num_stages=5, num_ctas=2, maxnreg=96, pre_hook=hook)
    config = Config.of(original)
    assert config == Config({"BLOCK": 128}, num_warps=2, num_stages=5, num_ctas=2, maxnreg=96)
    assert config.pre_hook is hook
    assert Config.of(config) is config


def test_an_ir_override_is_carried_to_the_launch_and_tells_configs_apart() -> None:
    config = Config.of(triton.Config({"BLOCK": 128}, ir_override="kernel.ttgir"))
    plain = Config({"BLOCK": 128})
    assert config.ir_override == "kernel.ttgir"
    assert config.all_kwargs()["ir_override"] == "kernel.ttgir"
    assert config != plain and config.digest != plain.digest
    assert Config.from_dict(config.to_dict()) == config
    assert "ir_override" not in plain.to_dict()  # configs without one keep their stored digests
    assert dict(config.all_kwargs()) == triton.Config({"BLOCK": 128}, ir_override="kernel.ttgir").all_kwargs()


def test_other_objects_are_not_configs() -> None:
    with pytest.raises(ConfigError, match=r"expected a kernelpick.Config or triton.Config, got dict"):
        Config.of({"BLOCK": 128})


@pytest.mark.parametrize("maxnreg", [None, 128])
def test_all_kwargs_match_tritons(maxnreg: int | None) -> None:
    original = triton.Config({"BLOCK": 128, "GROUP": 8}, num_warps=8, num_stages=2, maxnreg=maxnreg)
    launch = dict(Config.of(original).all_kwargs())
    assert launch == original.all_kwargs()
    assert ("maxnreg" in launch) == (maxnreg is not None)


def test_dict_round_trip_through_json() -> None:
    config = Config({"BLOCK": 64, "SPLIT": (1, 2)}, num_warps=8, num_stages=2, num_ctas=2, maxnreg=64)
    data = json.loads(json.dumps(config.to_dict()))
    assert data == {
        "kwargs": {"BLOCK": 64, "SPLIT": [1, 2]},
        "num_warps": 8,
        "num_stages": 2,
        "num_ctas": 2,
        "maxnreg": 64,
    }
    assert Config.from_dict(data) == config


def test_from_dict_fills_missing_options_with_defaults() -> None:
    assert Config.from_dict({"kwargs": {"BLOCK": 64}}) == Config({"BLOCK": 64})


def test_identity_is_canonical_json() -> None:
    config = Config({"B": 2, "A": 1}, num_warps=8)
    assert config.identity == (
        '{"kwargs":{"A":1,"B":2},"maxnreg":null,"num_ctas":1,"num_stages":3,"num_warps":8}'
    )


def test_dtype_meta_parameters_have_an_identity() -> None:
    a = Config({"ACC": tl.float32, "DT": torch.float16})
    assert a == Config({"ACC": tl.float32, "DT": torch.float16})
    assert a != Config({"ACC": tl.float16, "DT": torch.float16})
    assert '"ACC":"dtype:fp32"' in a.identity


def test_dtype_meta_parameters_become_strings_in_reports() -> None:
    from kernelpick.bench.result import BenchmarkResult, TimingSummary
    from kernelpick.device import DeviceInfo
    from kernelpick.engine.record import TuningRecord

    config = Config({"BLOCK": 64, "DTYPE": tl.float16})
    assert config.to_data()["kwargs"] == {"BLOCK": 64, "DTYPE": "dtype:fp16"}
    result = BenchmarkResult("ok", TimingSummary.of([1.0, 1.1]))
    device = DeviceInfo("cpu", None, "cpu", None, 0, 0)
    record = TuningRecord.of_configs("k", (64,), device, {config: result}, config, 0.1, False)
    assert json.loads(json.dumps(record.to_dict()))["best_config"]["kwargs"]["DTYPE"] == "dtype:fp16"


# Stored results are found again by digest, in other processes and after upgrades: these literals
# (computed once) must not change unless the store's schema version changes too.
def test_digest_is_a_stable_literal() -> None:
    assert Config({"BLOCK": 128}).digest == "bd784dfde583815a08fb"
    config = Config(
        {"BLOCK_M": 64, "ACC": tl.float32, "DT": torch.bfloat16, "S": (1, 2)}, num_warps=8, maxnreg=64
    )
    assert config.digest == "fec42bd26495a1dbcdf6"


def test_str_lists_meta_parameters_then_options_that_matter() -> None:
    assert str(Config({"BLOCK_M": 64, "BLOCK_N": 32})) == "BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3"
    assert str(Config({"BLOCK": 16}, num_warps=2, num_stages=1, num_ctas=2, maxnreg=128)) == (
        "BLOCK=16, num_warps=2, num_stages=1, num_ctas=2, maxnreg=128"
    )

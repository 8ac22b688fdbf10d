"""store/keys.py: a tuning key names every fact that invalidates a result, and hashes it stably."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import triton

from kernelpick.device import DeviceInfo
from kernelpick.store.keys import Toolchain, TuningKey, canonical_json, canonical_value

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
CPU = DeviceInfo("cpu", None, "cpu", None, 0, 0)


def make(**changes: object) -> TuningKey:
    key = TuningKey.make("mm", "source-hash-1", H100, [1024, 512, torch.float16, True])
    return dataclasses.replace(key, **changes)


def test_equal_keys_have_equal_digests() -> None:
    a = TuningKey.make("mm", "source-hash-1", H100, [1024, 512, torch.float16, True])
    b = TuningKey.make("mm", "source-hash-1", H100, (1024, 512, torch.float16, True))
    assert a == b
    assert hash(a) == hash(b)
    assert a.digest == b.digest
    assert len(a.digest) == 64


def test_make_records_device_capability_and_toolchain() -> None:
    key = make()
    assert (key.device, key.capability) == ("NVIDIA H100 80GB HBM3", "9.0")
    assert key.toolchain == Toolchain.current()
    assert key.toolchain.triton == triton.__version__
    assert key.toolchain.torch == torch.__version__
    assert key.inputs == (1024, 512, "torch.float16", True)
    cpu = TuningKey.make("mm", "source-hash-1", CPU, [])
    assert (cpu.device, cpu.capability, cpu.inputs) == ("cpu", "", ())


@pytest.mark.parametrize(
    "changes",
    [
        {"kernel": "bmm"},
        {"source": "source-hash-2"},
        {"device": "NVIDIA H200"},
        {"capability": "10.0"},
        {"toolchain": Toolchain("3.0.0", Toolchain.current().torch, Toolchain.current().cuda)},
        {"toolchain": Toolchain(Toolchain.current().triton, "2.0.0", Toolchain.current().cuda)},
        {"toolchain": Toolchain(Toolchain.current().triton, Toolchain.current().torch, "11.8")},
        {"inputs": (1024, 512, "torch.bfloat16", True)},
        {"inputs": (1024, 513, "torch.float16", True)},
        {"inputs": (1024, 512, "torch.float16", 1)},  # True and 1 are different key values
        {"inputs": (1024, 512, "torch.float16")},
    ],
)
def test_every_field_changes_the_digest(changes: dict[str, object]) -> None:
    assert make(**changes).digest != make().digest
    assert make(**changes) != make()  # keys that differ in digest are not equal either


def test_digest_is_sha256_of_the_canonical_form() -> None:
    import hashlib

    key = make()
    assert key.digest == hashlib.sha256(key.canonical.encode()).hexdigest()
    data = json.loads(key.canonical)
    assert data["inputs"] == [1024, 512, "torch.float16", True]
    assert data["toolchain"]["triton"] == triton.__version__


def test_digest_is_a_stable_literal() -> None:
    # Stored results are found again by this digest in other processes: it must not depend on
    # anything but the key's fields.
    key = TuningKey("mm", "abc", "cpu", "", Toolchain("3.9.0", "2.13.0", None), (1, "torch.float32"))
    assert key.canonical == (
        '{"capability":"","device":"cpu","inputs":[1,"torch.float32"],"kernel":"mm","source":"abc",'
        '"toolchain":{"cuda":null,"torch":"2.13.0","triton":"3.9.0"}}'
    )
    assert key.digest == "4bedee39479fd298e250e1d8b3ca04ecdf1e021587ffd8d65e81c0cc609e461a"


def test_canonical_json_is_the_same_for_equal_data() -> None:
    assert (
        canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (7, 7),
        (0.5, 0.5),
        ("row", "row"),
        (torch.float16, "torch.float16"),
        (torch.device("cpu"), "cpu"),
        ((1, (2, torch.int8)), [1, [2, "torch.int8"]]),
        ([3, 4], [3, 4]),
        ({1: torch.float32}, {"1": "torch.float32"}),
    ],
)
def test_canonical_value_of_plain_values(value: object, expected: object) -> None:
    assert canonical_value(value) == expected
    json.dumps(canonical_value(value))


def test_canonical_value_of_a_tensor_is_its_dtype_shape_and_strides_not_its_data() -> None:
    x = torch.zeros(4, 6, dtype=torch.float32)
    assert canonical_value(x) == {"dtype": "torch.float32", "shape": [4, 6], "stride": [6, 1]}
    assert canonical_value(x.t()) == {"dtype": "torch.float32", "shape": [6, 4], "stride": [1, 6]}
    assert canonical_value(torch.ones(4, 6)) == canonical_value(x)


class Layout:
    def __repr__(self) -> str:
        return "Layout(row)"


def test_canonical_value_of_other_objects_is_their_type_and_repr() -> None:
    assert canonical_value(Layout()) == "Layout:Layout(row)"
    assert canonical_value(triton.language.float16) == "dtype:triton.language.float16"

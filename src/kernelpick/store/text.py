"""Stored data for people: a candidate by its name or config text, a tuning key's inputs in short."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kernelpick.store.keys import TuningKey

#: A config's launch options in its name: in this order, by these shorter names.
_OPTIONS = {"num_warps": "warps", "num_stages": "stages", "num_ctas": "ctas", "maxnreg": "maxnreg"}


def candidate_name(description: Mapping[str, Any]) -> str:
    """A candidate's name wherever kernelpick shows one (tables, the store's commands, reports): a
    choice by its name; a config by its meta-parameters in name order, then its launch options
    ("BLOCK_K=32 BLOCK_M=64 warps=4 stages=3"; num_ctas=1 and unset options left out)."""
    if isinstance(description.get("name"), str):
        return str(description["name"])
    kwargs = description.get("kwargs")
    if isinstance(kwargs, Mapping):
        shown = [f"{k}={v}" for k, v in sorted(kwargs.items())]
        shown += [
            f"{short}={description[option]}"
            for option, short in _OPTIONS.items()
            if description.get(option) is not None and (option, description[option]) != ("num_ctas", 1)
        ]
        shown += [
            f"{k}={v}"
            for k, v in sorted(description.items())
            if k != "kwargs" and k not in _OPTIONS and v is not None
        ]
        return " ".join(shown)
    return json.dumps(description, sort_keys=True)


def value_text(value: Any, *, compact: bool = True) -> str:
    """A stored key value: a dtype without `torch.`, a tensor as dtype[size].

    Args:
        value: plain data, as a store key holds it.
        compact: tensors as `float16[64,32]`, lists as `(1, 2)` and mappings as JSON (for tables);
            else as Python prints them, `float16[64, 32]` and `[1, 2]`, as a selector's signature
            reads in the tuning log.
    """
    if isinstance(value, str):
        return value.removeprefix("torch.")
    if isinstance(value, Mapping) and "dtype" in value:
        size = value.get("size", value.get("shape"))
        if isinstance(size, list):
            comma = "," if compact else ", "
            return f"{value_text(value['dtype'])}[{comma.join(str(n) for n in size)}]{_layout(value, comma)}"
    if not compact:
        return str(value)
    if isinstance(value, list):
        return "(" + ", ".join(value_text(v) for v in value) + ")"
    return json.dumps(value, sort_keys=True) if isinstance(value, Mapping) else str(value)


def _layout(tensor: Mapping[str, Any], comma: str) -> str:
    """What tells a stored tensor from a new row-major one of its size (keys differ by these alone):
    its strides where they are not row-major (a transposed input), its storage offset, and
    "misaligned" where its data starts off a 16-byte boundary."""
    size, stride = tensor.get("size"), tensor.get("stride")
    shown = []
    if isinstance(size, list) and isinstance(stride, list) and stride != _row_major(size):
        shown.append(f"stride=[{comma.join(str(n) for n in stride)}]")
    if tensor.get("offset"):
        shown.append(f"offset={tensor['offset']}")
    if tensor.get("aligned") is False:
        shown.append("misaligned")
    return "".join(f" {part}" for part in shown)


def _row_major(size: Sequence[Any]) -> list[Any]:
    strides, step = [], 1
    for extent in reversed(size):
        strides.append(step)
        step *= max(int(extent), 1) if isinstance(extent, int) else 1
    return list(reversed(strides))


def inputs_text(inputs: Sequence[Any], limit: int | None = 60, *, compact: bool = True) -> str:
    """A key's inputs (`value_text`), a specialization only where notable (see
    `kernelpick.tune.dispatch`), cut to `limit` characters (None: whole)."""
    shown = [
        notable_specialization(v) if is_specialization(v) else value_text(v, compact=compact) for v in inputs
    ]
    text = ", ".join(filter(None, shown))
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def key_text(key: TuningKey, *, compact: bool = True) -> str:
    """A stored key's inputs for people, in parentheses: a selector's inputs, then its keyword
    inputs and its own key where it has them; a tuned kernel's key values, the dtypes of its tensors
    and their notable specialization. Whole: keys may differ by a stride or an alignment alone."""
    inputs = list(key.inputs)
    if not key.source.startswith("select-"):
        return f"({inputs_text(inputs, None, compact=compact)})"
    positional = inputs[0] if inputs else []
    kwargs = inputs[1] if len(inputs) > 1 else []
    user_key = inputs[2] if len(inputs) > 2 else None
    parts = [inputs_text(positional, None, compact=compact)] if positional else []
    parts += [
        f"{pair[0]}={value_text(pair[1], compact=compact)}"
        for pair in kwargs
        if isinstance(pair, list) and len(pair) == 2
    ]
    if user_key is not None:
        parts.append(f"key={value_text(user_key, compact=compact)}")
    return "(" + ", ".join(part for part in parts if part) + ")"


def notable_specialization(text: str) -> str:
    """A specialization's marks (`tune.dispatch.exact_key`) other than the usual "D": "x_ptr:- n:1"."""
    return " ".join(mark for mark in text.split() if mark[-1] in "-1")


def is_specialization(value: Any) -> bool:
    """Whether a key value (as stored: plain data) is a specialization (`tune.dispatch.exact_key`)."""
    return isinstance(value, str) and _SPECIALIZATION.fullmatch(value) is not None


_SPECIALIZATION = re.compile(r"(\w+:[D1-]( \w+:[D1-])*)?")

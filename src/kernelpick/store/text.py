"""Stored data for people: a candidate by its name or config text, a tuning key's inputs in short."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

_OPTION_ORDER = {"num_warps": 0, "num_stages": 1, "num_ctas": 2, "maxnreg": 3}


def candidate_name(description: Mapping[str, Any]) -> str:
    """A config as its kwargs and options ("BLOCK=64, num_warps=4, num_stages=3"), a choice by name."""
    if isinstance(description.get("name"), str):
        return str(description["name"])
    kwargs = description.get("kwargs")
    if isinstance(kwargs, Mapping):
        # In the order Config's own text has, less num_ctas=1 (the default) and unset options.
        options = sorted(description.items(), key=lambda item: (_OPTION_ORDER.get(item[0], 99), item[0]))
        shown = [(k, v) for k, v in options if k != "kwargs" and v is not None and (k, v) != ("num_ctas", 1)]
        return ", ".join(f"{k}={v}" for k, v in [*kwargs.items(), *shown])
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
            return f"{value_text(value['dtype'])}[{(',' if compact else ', ').join(str(n) for n in size)}]"
    if not compact:
        return str(value)
    if isinstance(value, list):
        return "(" + ", ".join(value_text(v) for v in value) + ")"
    return json.dumps(value, sort_keys=True) if isinstance(value, Mapping) else str(value)


def inputs_text(inputs: Sequence[Any], limit: int | None = 60, *, compact: bool = True) -> str:
    """A key's inputs (`value_text`), a specialization only where notable (see
    `kernelpick.tune.dispatch`), cut to `limit` characters (None: whole)."""
    shown = [
        notable_specialization(v) if is_specialization(v) else value_text(v, compact=compact) for v in inputs
    ]
    text = ", ".join(filter(None, shown))
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def notable_specialization(text: str) -> str:
    """The marks of a `kernelpick.tune.dispatch.specialization()` other than the usual "D": "x_ptr:- n:1"."""
    return " ".join(mark for mark in text.split() if mark[-1] in "-1")


def is_specialization(value: Any) -> bool:
    """Whether a key value (as stored: plain data) is a `kernelpick.tune.dispatch.specialization()`."""
    return isinstance(value, str) and _SPECIALIZATION.fullmatch(value) is not None


_SPECIALIZATION = re.compile(r"(\w+:[D1-]( \w+:[D1-])*)?")

"""The exceptions kernelpick raises, all derived from `KernelpickError`."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from triton import TritonError
from triton.runtime.errors import InterpreterError, OutOfResources

try:  # Triton 3.7 and newer: what `triton.autotune` raises when pruning leaves no config
    from triton.runtime.errors import AutotunerError as _AutotunerError
except ImportError:  # pragma: no cover - older Triton
    _AutotunerError = TritonError


class KernelpickError(Exception):
    """Base class of every error kernelpick raises on purpose.

    Where `triton.autotune` raises one of Triton's errors for the same failure, kernelpick's error
    derives from that one too, so that code written for Triton (`except triton.TritonError`,
    `except OutOfResources`) keeps catching it; each keeps its own name and message.
    """


class SettingsError(KernelpickError, ValueError):
    """A `KERNELPICK_*` variable or a settings override has a value of the wrong kind."""


class ConfigError(KernelpickError, ValueError):
    """A tuning decorator or config was given arguments that cannot work (found at decoration time)."""


class NoValidConfigs(KernelpickError, _AutotunerError, RuntimeError):  # type: ignore[misc]
    """Every config of a tuning space failed, or pruning left none; the message lists each config
    and why. A `triton.TritonError` (Triton's `AutotunerError` where it has one), as Triton's are."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.error_message = message

    def __str__(self) -> str:
        return self.error_message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.error_message,)


class ConfigsOutOfResources(NoValidConfigs, OutOfResources):  # type: ignore[misc]
    """Every config of a tuning space ran out of a resource (shared memory, threads, registers).

    Also an `OutOfResources`, which `triton.autotune` raises in this case, with the `required`,
    `limit` and `name` of the first config's failure where its message gives them (else None).
    """

    def __init__(self, message: str, first_failure: str = "") -> None:
        NoValidConfigs.__init__(self, message)
        found = _RESOURCE.search(first_failure)
        self.name = found.group("name") if found else None
        self.required = int(found.group("required")) if found else None
        self.limit = int(found.group("limit")) if found else None

    def __str__(self) -> str:
        return self.error_message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.error_message,)


_RESOURCE = re.compile(
    r"out of resource: (?P<name>[^,]+), Required: (?P<required>\d+), Hardware limit: (?P<limit>\d+)"
)


class ConfigFailed(KernelpickError, TritonError):  # type: ignore[misc]
    """What a `post_hook` is given for a config that failed before it could run (it did not
    compile, say), when the original exception stayed in the compiler's process: its status and
    message."""

    def __init__(self, status: str, message: str) -> None:
        Exception.__init__(self, message)
        self.status = status
        self.error_message = message

    def __str__(self) -> str:
        return self.error_message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.status, self.error_message)


def failure_exception(status: str, message: str) -> BaseException:
    """Triton's exception for a failed config, as `post_hook(..., exception=...)` receives it:
    `OutOfResources` (with its figures) for a resource failure, else `ConfigFailed`."""
    found = _RESOURCE.search(message) if status == "out_of_resources" else None
    if found is not None:
        error: BaseException = OutOfResources(
            int(found.group("required")), int(found.group("limit")), found.group("name")
        )
        return error
    return ConfigFailed(status, message)


def no_valid_configs(message: str, failures: Mapping[Any, Any]) -> NoValidConfigs:
    """The error for a tuning whose every config failed: `ConfigsOutOfResources` when each ran out
    of a resource (`failures`: results with `status` and `message`), else `NoValidConfigs`."""
    results = list(failures.values())
    if results and all(r.status == "out_of_resources" for r in results):
        return ConfigsOutOfResources(message, results[0].message)
    return NoValidConfigs(message)


class InterpretationError(KernelpickError, InterpreterError):  # type: ignore[misc]
    """A kernel failed in Triton's interpreter: the message names the kernel, the file and line of its
    source that failed, and what to do. Also Triton's `InterpreterError`, which the interpreter raises.

    `kernel`, `filename` and `line` say where (the kernel's definition when no line of it was running).
    """

    def __init__(self, message: str, kernel: str = "", filename: str = "", line: int = 0) -> None:
        Exception.__init__(self, message)
        self.error_message = message
        self.kernel, self.filename, self.line = kernel, filename, line

    def __str__(self) -> str:
        return self.error_message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.error_message, self.kernel, self.filename, self.line)


class NoValidChoices(KernelpickError, RuntimeError):
    """Every choice of a selector failed for one input signature; the message lists each choice and why."""


class TemplateError(KernelpickError, ValueError):
    """A kernel template could not be rendered with the inputs, config or epilogue given."""


class ArgumentError(ConfigError, TypeError):
    """A tuned kernel or a selector was called with an argument it cannot take (a meta tensor, a
    list); the message names the argument, says what it is and what is expected. A `ConfigError`,
    and a `TypeError` as Triton's own complaint about such an argument is."""


class AnalysisError(KernelpickError, ValueError):
    """A kernel could not be analyzed with the arguments given (missing or malformed arguments)."""


class IsolationError(KernelpickError, RuntimeError):
    """Something cannot be measured in a worker process (it cannot be serialized, the workers do not
    start); the caller then measures it in its own process and says why."""


class StoreError(KernelpickError, RuntimeError):
    """The result store could not be opened, read or written."""


class CacheDirError(KernelpickError, OSError):
    """The cache dir (`KERNELPICK_CACHE_DIR`) cannot be created or written; the message names the
    folder (also in `path`) and why. An `OSError` too, as the failure it reports was."""

    def __init__(self, message: str, path: str) -> None:
        OSError.__init__(self, message)
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (str(self), self.path)


class TableError(KernelpickError, ValueError):
    """A deployment table cannot be read, or was made for another device model or toolchain."""


class TuningRequired(KernelpickError, RuntimeError):
    """`KERNELPICK_NO_TUNING=1` and a call has no pick in a deployment table or the store."""


class TuningInCapture(TuningRequired):
    """A key met for the first time while a CUDA graph is being captured: tuning runs and times its
    candidates, which a capture cannot hold."""


class OperatorError(KernelpickError, ValueError):
    """A kernelpick PyTorch operator or launch was declared or called in a way that cannot work."""


class OperatorNotRegistered(OperatorError, AttributeError):
    """`torch.ops.<namespace>.<name>` of a `kernelpick.op` before its registration (an AttributeError too,
    so that `hasattr` and `getattr(..., default)` keep working)."""


class MutatesArgsError(OperatorError):
    """An operator's explicit `mutates_args` disagrees with what its kernels were found to write."""


class ReportError(KernelpickError, ValueError):
    """A report cannot be made from what it was given; the message says what to give instead."""


def describe_value(value: object, limit: int = 200) -> str:
    """A value as an error message shows it: a tensor by its dtype, size and device, never its values
    (a repr of a large tensor runs to pages), a list or tuple of tensors the same way, anything else
    by its repr cut to `limit` characters."""
    torch = sys.modules.get("torch")  # a value cannot be a tensor before torch is imported
    if torch is not None and isinstance(value, torch.Tensor):
        kind = "tensor" if type(value) in (torch.Tensor, torch.nn.Parameter) else type(value).__name__
        dtype = str(value.dtype).removeprefix("torch.")
        return f"a {dtype} {kind} of size {list(value.shape)} on {value.device}"
    if isinstance(value, (list, tuple)) and torch is not None:
        if any(isinstance(v, torch.Tensor) for v in value):
            shown = [describe_value(v, limit) for v in value[:4]] + (["..."] if len(value) > 4 else [])
            text = ", ".join(shown)
            return f"[{text}]" if isinstance(value, list) else f"({text})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."

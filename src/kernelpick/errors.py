"""The exceptions kernelpick raises; every one derives from `KernelpickError`."""

from __future__ import annotations


class KernelpickError(Exception):
    """Base class of every error kernelpick raises on purpose."""


class SettingsError(KernelpickError, ValueError):
    """A `KERNELPICK_*` variable or a settings override has a value of the wrong kind."""


class ConfigError(KernelpickError, ValueError):
    """A tuning decorator or config was given arguments that cannot work (found at decoration time)."""


class NoValidConfigs(KernelpickError, RuntimeError):
    """Every config of a tuning space failed; the message lists each config and why."""


class NoValidChoices(KernelpickError, RuntimeError):
    """Every choice of a selector failed for one input signature; the message lists each choice and why."""


class TemplateError(KernelpickError, ValueError):
    """A kernel template could not be rendered with the inputs, config or epilogue given."""


class AnalysisError(KernelpickError, ValueError):
    """A kernel could not be analyzed with the arguments given (missing or malformed arguments)."""


class StoreError(KernelpickError, RuntimeError):
    """The result store could not be opened, read or written."""


class TableError(KernelpickError, ValueError):
    """A deployment table cannot be read, or was made for another device model or toolchain."""


class TuningRequired(KernelpickError, RuntimeError):
    """`KERNELPICK_NO_TUNING=1` and a call has no winner in a deployment table or the store."""


class OperatorError(KernelpickError, ValueError):
    """A kernelpick PyTorch operator or launch was declared or called in a way that cannot work."""


class OperatorNotRegistered(OperatorError, AttributeError):
    """`torch.ops.<namespace>.<name>` of a `kernelpick.op` before its registration (an AttributeError too,
    so that `hasattr` and `getattr(..., default)` keep working)."""


class MutatesArgsError(OperatorError):
    """An operator's explicit `mutates_args` disagrees with what its kernels were found to write."""

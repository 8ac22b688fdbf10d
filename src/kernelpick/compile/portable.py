"""One config of a tuned kernel as a candidate a worker can run: the kernel, its meta-parameters and grid."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kernelpick.compile.launch import runner
from kernelpick.compile.precompile import CompileJob, CompileOutcome
from kernelpick.device import DeviceInfo


@dataclass(frozen=True)
class KernelLaunch:
    """Launch `kernel` with `meta` (a config's meta-parameters and options) on a grid of `grid`
    programs, given the kernel's call arguments: `launch(*args, **kwargs)`.

    A worker gets the configs of one kernel without it (`kernel` None, a few bytes each) and the
    kernel once, with the problem: `bound` puts them together there.
    """

    name: str
    meta: Mapping[str, Any]
    grid: tuple[int, ...]
    kernel: Any = None
    interpreter: bool = False

    def bound(self, kernel: Any, interpreter: bool) -> KernelLaunch:
        """This config of `kernel`, launched on a GPU or in Triton's interpreter."""
        return replace(self, kernel=kernel, interpreter=interpreter)

    def compile_job(self, example: Any, device: DeviceInfo) -> CompileJob | CompileOutcome | None:
        """Nothing to compile: the caller compiled every config before sending any."""
        return None

    def callable(self) -> Callable[..., Any]:
        return functools.partial(
            runner(self.kernel, self.interpreter), grid=self.grid, warmup=False, **self.meta
        )

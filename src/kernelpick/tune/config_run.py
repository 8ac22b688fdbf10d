"""One config of a tuned kernel as something the benchmarker times (`kernelpick.bench.Benchmarkable`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from kernelpick.bench.inputs import ScratchArguments
from kernelpick.tune.config import Config


class ConfigRun:
    """One config of one kernel, as a `Benchmarkable`: restore copies, call hooks, launch."""

    def __init__(
        self,
        config: Config,
        run: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        grid: Any,
        scratch: ScratchArguments,
        pre_hook: Callable[..., Any] | None,
        post_hook: Callable[..., Any] | None,
    ) -> None:
        self.name = str(config)
        self.config = config
        if isinstance(grid, Mapping):  # one grid per config, evaluated where the kernel was called
            grid = grid[config]
        self._launch = functools.partial(run, *args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        self._scratch = scratch
        self._hooks = [h for h in (config.pre_hook, pre_hook) if h is not None]
        self._post_hook = post_hook
        #: Hooks are the user's Python, to be called at every run: never replayed from a CUDA graph.
        self.capturable = not self._hooks and self._post_hook is None
        self._named = {**scratch.arguments, **config.all_kwargs()}

    def setup(self) -> None:
        self._scratch.restore()
        for hook in self._hooks:
            hook(self._named)

    def run(self) -> None:
        if self._post_hook is None:
            self._launch()
            return
        try:
            self._launch()
        except BaseException as error:  # as Triton: the post_hook is told, then the failure goes on
            self._post_hook(self._named, exception=error)
            raise

    def teardown(self) -> None:
        if self._post_hook is not None:
            self._post_hook(self._named, exception=None)

    def failed_before_running(self, error: BaseException) -> None:
        """Tell the hooks about a failure found before any run (a compile error): each `pre_hook`
        is paired with the `post_hook`, which receives the failure, as in Triton."""
        if not self._hooks and self._post_hook is None:
            return
        self.setup()
        if self._post_hook is not None:
            self._post_hook(self._named, exception=error)

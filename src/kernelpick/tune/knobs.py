"""What `triton.knobs.autotuning` asks of a tuner once it has picked: a printed line, a listener's call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton

from kernelpick.select.record import TuningRecord

if TYPE_CHECKING:
    from kernelpick.tune.autotuner import Autotuner


def tell_triton_knobs(tuner: Autotuner, key: tuple[Any, ...], record: TuningRecord, best: Any) -> None:
    """What `triton.knobs.autotuning` asks of a tuner: a printed line (`TRITON_PRINT_AUTOTUNING`)
    and a call of its listener, where the installed Triton has one."""
    knobs = triton.knobs.autotuning
    if knobs.print and not record.from_store:
        print(
            f"kernelpick autotuning for function {tuner.name},\nwith key as {key},\n"
            f"finished after {record.seconds:.2f}s,\nbest config selected: {best};"
        )
    listener = getattr(knobs, "listener", None)
    if listener is not None:
        listener(
            fn=tuner.base_fn,
            key=key,
            best_config=best,
            configs_timings=tuner.configs_timings,
            duration=None if record.from_store else record.seconds,
            cache_hit=record.from_store,
        )

"""Host time per call: how long the host takes to issue one call in a stream of back-to-back calls."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Calls per batch: few enough that the device's launch queue (about a thousand entries) never
#: fills, which would make the host wait for the device and count device time as host time.
CALLS = 20
#: Batches whose fastest is the figure: what interferes with a host (another process, an interrupt,
#: a page fault) only ever adds time, so the fastest batch is the call's own cost; a median would
#: count the interference too.
BATCHES = 5


def host_ms(
    run: Callable[[], object],
    synchronize: Callable[[], object],
    device_ms: float,
    *,
    calls: int = CALLS,
    batches: int = BATCHES,
) -> float:
    """Milliseconds of host time per call of `run`.

    One short batch first: a call whose host time is well under its device time (a large GEMM)
    is device-bound, and that batch says enough. Otherwise `batches` batches of `calls` calls, each
    after the device has caught up, and the fastest of them.

    Args:
        run: the call, exactly as the hot path makes it.
        synchronize: waits for the device.
        device_ms: the call's device time (its median), to skip the batches when it dominates.
    """
    first = _batch(run, synchronize, max(2, calls // 4))
    if first < 0.5 * device_ms:
        return first
    return min(_batch(run, synchronize, calls) for _ in range(batches))


def _batch(run: Callable[[], object], synchronize: Callable[[], object], calls: int) -> float:
    synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    elapsed = time.perf_counter() - start
    synchronize()
    return elapsed * 1e3 / calls

"""Tuned calls as data: the keys a run meets, recorded with `KERNELPICK_RECORD`, and made again."""

from __future__ import annotations

from kernelpick.calls.origins import import_file, made_by
from kernelpick.calls.recorder import read_recording, record_kernel_call, record_selector_call, replay_call

__all__ = [
    "import_file",
    "made_by",
    "read_recording",
    "record_kernel_call",
    "record_selector_call",
    "replay_call",
]

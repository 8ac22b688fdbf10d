"""The tuned matmul of the autotuning benchmarks, made at import as a user's module makes it.

Importing this module is the "decoration" the benchmarks time from (it also starts the workers, as
any module that makes a tuned kernel does on a GPU machine). Isolated workers need nothing of it:
the kernel crosses to them by value.
"""

from __future__ import annotations

from autotune_space import triton_configs

import kernelpick
from kernelpick.demo import matmul_kernel

#: With the settings a user gets by default (KERNELPICK_ISOLATE from the environment).
tuned_matmul = kernelpick.autotune(triton_configs(), key=["M", "N", "K"])(matmul_kernel)

"""The tuned matmul of the autotuning benchmarks, made at import as a user's module makes it.

A kernel tuned in isolated workers must be importable by them: bound to a module-level name, as
here. Importing this module is the "decoration" the benchmarks time from (it also starts the
workers, as any module that makes a tuned kernel does on a GPU machine).
"""

from __future__ import annotations

from autotune_space import triton_configs

import kernelpick
from kernelpick.demo import matmul_kernel

#: With the settings a user gets by default (KERNELPICK_ISOLATE from the environment).
tuned_matmul = kernelpick.autotune(triton_configs(), key=["M", "N", "K"])(matmul_kernel)

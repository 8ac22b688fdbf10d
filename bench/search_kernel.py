"""The tuned matmul of `bench/search_runs.py`, made at import as a user's module makes it.

Bound to a module-level name so that isolated workers can import it: the runs take the default
path (`kernelpick.autotune`, forked compilers, isolated workers). Its space is `bench/search.py`'s
exhaustive GEMM space cut to this device's shared memory; the search is chosen by the
KERNELPICK_SEARCH* settings of the process.
"""

from __future__ import annotations

import torch

import kernelpick
from kernelpick.demo import matmul_kernel
from search import space

_limit = int(getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", 0)) or 232448
tuned_matmul = kernelpick.autotune(space(_limit)[0], key=["M", "N", "K"])(matmul_kernel)

"""Compilation of Triton kernels: explicit targets, parallel precompilation, and launching."""

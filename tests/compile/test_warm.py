"""compile/warm.py: what Triton's first compile in a process waits for, done ahead of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_after_the_warm_up_tritons_first_specialization_imports_nothing() -> None:
    # A fresh interpreter: this one's first specialization happened long ago.
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        from kernelpick.compile.warm import warm_up_compiler
        try:
            warm_up_compiler()
        except Exception:  # no GPU here: the driver's part fails, after the specialization's
            pass
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.split()[-1] == "0"


def test_without_it_the_first_specialization_imports_tritons_modules() -> None:
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(found.stdout.split()[-1]) > 10  # what the warm-up takes off the first tuning

"""An indented code buffer: what kernel templates use to write Python and Triton source."""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterable, Iterator

INDENT = "    "


class CodeBuffer:
    """Lines of source at a current indentation level.

    Example:
        >>> code = CodeBuffer()
        >>> code.line("def f(x):")
        >>> with code.indent():
        ...     code.line("return x + 1")
        >>> print(code.getvalue(), end="")
        def f(x):
            return x + 1
    """

    def __init__(self, level: int = 0, unit: str = INDENT) -> None:
        self._lines: list[str] = []
        self._level = level
        self._unit = unit

    @property
    def level(self) -> int:
        """The current indentation level (0: column 0)."""
        return self._level

    def line(self, text: str = "") -> None:
        """Append one line at the current indentation (an empty line stays empty)."""
        if "\n" in text:
            raise ValueError(f"CodeBuffer.line takes one line; use splice() for several: {text!r}")
        self._lines.append(self._unit * self._level + text if text.strip() else "")

    def lines(self, texts: Iterable[str]) -> None:
        """Append several lines at the current indentation."""
        for text in texts:
            self.line(text)

    def splice(self, block: str) -> None:
        """Append a multi-line block: its common indentation is removed, then the current one added."""
        block = textwrap.dedent(block).strip("\n")
        for text in block.splitlines():
            self.line(text.rstrip())

    @contextlib.contextmanager
    def indent(self, levels: int = 1) -> Iterator[CodeBuffer]:
        """Indent what is appended inside the `with` block by `levels` more."""
        self._level += levels
        try:
            yield self
        finally:
            self._level -= levels

    def getvalue(self) -> str:
        """The source, one newline after each line."""
        return "".join(f"{text}\n" for text in self._lines)

    def __str__(self) -> str:
        return self.getvalue()

    def __len__(self) -> int:
        return len(self._lines)


def indent_block(block: str, prefix: str) -> str:
    """Prefix every non-empty line of `block` with `prefix` (empty lines stay empty)."""
    return "\n".join(prefix + text if text.strip() else "" for text in block.split("\n"))

"""Rendering pieces: partial renders finished by hooks, and epilogues over a kernel's accumulator."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kernelpick.codegen import indent_block
from kernelpick.errors import TemplateError

Hook = Callable[[], str]

#: Names an epilogue expression may use besides `acc` and its inputs.
EPILOGUE_GLOBALS = frozenset({"tl", "triton", "libdevice", "math"})


class PartialRender:
    """Rendered code with placeholders that hooks fill in once the whole body is known.

    A placeholder alone on its line is replaced by the hook's text, every line of it indented like the
    placeholder; a placeholder inside a line is replaced by the text as it is.

    Args:
        code: the rendered code, placeholders included.
        hooks: placeholder -> function returning its text; they run in this order.
    """

    def __init__(self, code: str, hooks: Mapping[str, Hook]) -> None:
        self._code = code
        self._hooks: dict[str, Hook | None] = dict(hooks)

    def finalize_hook(self, placeholder: str) -> None:
        """Run one hook and put its text in place of its placeholder.

        Raises:
            TemplateError: the hook is unknown or already finalized.
        """
        if placeholder not in self._hooks:
            raise TemplateError(f"no hook is registered for the placeholder {placeholder!r}")
        hook = self._hooks[placeholder]
        if hook is None:
            raise TemplateError(f"the hook for {placeholder!r} was already finalized")
        text = hook()
        lines = []
        for line in self._code.split("\n"):
            if line.strip() != placeholder:
                lines.append(line.replace(placeholder, text))
            elif text.strip():
                indent = line[: len(line) - len(line.lstrip())]
                lines.append(indent_block(text.strip("\n"), indent))
        self._code = "\n".join(lines)
        self._hooks[placeholder] = None

    def finalize(self) -> str:
        """Run every remaining hook, in registration order, and return the finished code.

        Raises:
            TemplateError: a placeholder is still in the code afterwards (a hook wrote one).
        """
        for placeholder in self.pending:
            self.finalize_hook(placeholder)
        left = [p for p in self._hooks if p in self._code]
        if left:
            raise TemplateError(f"placeholders left after every hook ran: {left}")
        return self._code

    @property
    def pending(self) -> list[str]:
        """Placeholders whose hooks have not run yet."""
        return [p for p, hook in self._hooks.items() if hook is not None]


def _substitute(expression: ast.expr, names: Mapping[str, str | ast.expr]) -> str:
    """The expression's source with names replaced by other names or by whole expressions."""

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            replacement = names.get(node.id)
            if replacement is None:
                return node
            if isinstance(replacement, str):
                replacement = ast.Name(id=replacement, ctx=node.ctx)
            return ast.copy_location(copy.deepcopy(replacement), node)

    return ast.unparse(Substitute().visit(copy.deepcopy(expression)))


@dataclass(frozen=True, slots=True)
class Epilogue:
    """Elementwise code applied to a kernel's accumulator before it is stored.

    `expression` is a Triton expression over `acc` (the float32 accumulator tile) and the names in
    `inputs`: each names a tensor input of the operation, broadcast to the output's size and loaded
    as a float32 tile of the same shape. Example: `Epilogue("tl.maximum(acc + bias, 0.0)", ("bias",))`.

    Raises:
        TemplateError: the expression does not parse, or uses names other than `acc`, its inputs
            and `tl`/`triton`/`libdevice`/`math`.
    """

    expression: str
    inputs: tuple[str, ...] = ()
    name: str = ""
    _parsed: ast.expr = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        try:
            parsed = ast.parse(self.expression.strip(), mode="eval").body
        except SyntaxError as error:
            raise TemplateError(
                f"epilogue {self.expression!r} is not a Python expression: {error.msg}; "
                "write one expression over `acc` and the epilogue's inputs"
            ) from None
        used = {node.id for node in ast.walk(parsed) if isinstance(node, ast.Name)}
        unknown = sorted(used - {"acc", *self.inputs} - EPILOGUE_GLOBALS)
        if unknown:
            raise TemplateError(
                f"epilogue {self.expression!r} uses {', '.join(unknown)}, which "
                f"{'is' if len(unknown) == 1 else 'are'} neither `acc` nor one of its inputs "
                f"{list(self.inputs)}: list every tensor it reads in `inputs`"
            )
        if "acc" in self.inputs:
            raise TemplateError("an epilogue input may not be called `acc`: that name is the accumulator")
        object.__setattr__(self, "_parsed", parsed)
        if not self.name:
            object.__setattr__(self, "name", ast.unparse(parsed))

    def then(self, expression: str, inputs: Sequence[str] = (), name: str = "") -> Epilogue:
        """This epilogue followed by another, whose `acc` is this one's result (`.then("tl.abs(acc)")`)."""
        following = Epilogue(expression, tuple(inputs))
        combined = _substitute(following._parsed, {"acc": self._parsed})
        merged = (*self.inputs, *(n for n in following.inputs if n not in self.inputs))
        return Epilogue(combined, merged, name or f"{self.name}; {following.name}")

    def code(self, names: Mapping[str, str]) -> str:
        """The expression with `acc` and the inputs renamed to the kernel's variables."""
        return _substitute(self._parsed, names)

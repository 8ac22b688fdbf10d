"""`kernelpick.processed`: a choice that transforms its inputs and output, and pre-packs tensors once."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from kernelpick.bench.benchmarker import classify_run_error
from kernelpick.bench.inputs import Example
from kernelpick.compile.precompile import CompileJob, CompileOutcome
from kernelpick.config import Config
from kernelpick.engine.choice import (
    Choice,
    ChoiceSpace,
    function_identity,
    qualified_name,
    searched_as,
    short_hash,
)
from kernelpick.engine.eligibility import requirements_of
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError
from kernelpick.select.template_choice import UnavailableChoice
from kernelpick.tensors import TensorSpec, example_generator, example_tensor

log = logging.getLogger("kernelpick.select")

Before = Callable[..., Sequence[Any]]
After = Callable[[Any], Any]
Pack = Callable[[torch.Tensor], Any]
Prepared = tuple[tuple[Any, ...], dict[str, Any]]  # the inputs and keywords the wrapped choice receives


class PrepackCache:
    """`pack(tensor)` made once per tensor and version; `get` is what a call runs.

    Args:
        pack: makes the packed form of one tensor; it is not timed when choices are benchmarked.
    """

    def __init__(self, pack: Callable[[torch.Tensor], Any]) -> None:
        self.pack = pack
        #: By the tensor's id: a weak reference to it, its version and address when packed, the packed form.
        self._entries: dict[int, tuple[weakref.ReferenceType[torch.Tensor], tuple[int, int], Any]] = {}
        self._lock = threading.Lock()

    def get(self, tensor: torch.Tensor) -> Any:
        """The packed form of `tensor`, packed now if it never was or changed since."""
        try:
            now = (int(tensor._version), tensor.data_ptr())
        except RuntimeError:  # "Inference tensors do not track version counter"
            now = (-1, tensor.data_ptr())
        entry = self._entries.get(id(tensor))
        if entry is None or entry[0]() is not tensor or entry[1] != now:
            with self._lock:  # one pack per tensor, even when several choices' threads ask at once
                entry = self._entries.get(id(tensor))
                if entry is None or entry[0]() is not tensor or entry[1] != now:
                    entry = self._entries[id(tensor)] = (self._source_ref(tensor), now, self.pack(tensor))
        return entry[2]

    def _source_ref(self, tensor: torch.Tensor) -> weakref.ReferenceType[torch.Tensor]:
        key, entries = id(tensor), self._entries

        def forget(ref: weakref.ReferenceType[torch.Tensor]) -> None:
            # Only this tensor's entry: a new tensor may already have the dead one's id.
            entry = entries.get(key)
            if entry is not None and entry[0] is ref:
                entries.pop(key, None)

        return weakref.ref(tensor, forget)


class ProcessedChoices:
    """A choice that processes its inputs before the call and its output after it (`kernelpick.processed`).

    The processing is timed with the choice (a transpose that costs a copy makes the choice pay for
    that copy), except pre-packing, which is done once per tensor and kept while the tensor is
    unchanged, as a program packs a weight once: it is done before timing and not timed. Outputs are
    verified against the reference like any choice's. Its digest, and so what the store remembers of
    it, changes with the processing's functions (their qualified names and code).

    Args:
        choice: the choice to wrap: `extern(...)`, `triton_choice(...)`, `template(...)` (each of its
            configs is wrapped).
        before: `before(*inputs) -> tuple` of the inputs the choice receives (after pre-packing);
            keyword arguments pass through as they are.
        after: `after(output) -> output`, applied to what the choice returns. When the selector is
            called with `out=`, the choice then makes a new output and `after`'s result is copied into
            `out`.
        prepack: `{input index: pack}`: `pack(tensor)` replaces that positional input, made once per
            tensor and cached by the tensor's identity and version (`tensor._version`, which in-place
            PyTorch ops bump; after writing a tensor another way, e.g. with a Triton kernel, call
            `torch.autograd.graph.increment_version(tensor)`).
        name: its name in tables (default: the wrapped choice's name and the processing's functions).

    Raises:
        ConfigError: `choice` is not a choice, a function is not callable, a prepack key is not an
            input index, or no processing was given.
    """

    def __init__(
        self,
        choice: ChoiceSpace,
        *,
        before: Before | None = None,
        after: After | None = None,
        prepack: Mapping[int, Pack] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(choice, ChoiceSpace):
            raise ConfigError(
                f"kernelpick.processed wraps a choice: kernelpick.extern(...), triton_choice(...) or "
                f"template(...), got {type(choice).__name__}: {choice!r}"
            )
        functions = {"before": before, "after": after}
        for label, fn in functions.items():
            if fn is not None and not callable(fn):
                raise ConfigError(
                    f"kernelpick.processed({label}=...) expects a function, got {type(fn).__name__}"
                )
        self.inner = choice
        #: What the wrapped space needs of a device, if it says (`kernelpick.engine.eligibility`).
        self.requires = requirements_of(choice)
        self.before, self.after = before, after
        if prepack is not None and not isinstance(prepack, Mapping):
            raise ConfigError(
                f"kernelpick.processed(prepack=...) expects a dict {{input index: pack function}}, "
                f"got {type(prepack).__name__}"
            )
        for index, pack in (prepack or {}).items():
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ConfigError(
                    f"kernelpick.processed(prepack=...) has key {index!r}: keys are positional input "
                    "indices (0 for the first input)"
                )
            if not callable(pack):
                raise ConfigError(
                    f"kernelpick.processed(prepack=...) packs input {index} with a {type(pack).__name__}, "
                    "expected a function of the tensor"
                )
        self.prepack = {index: PrepackCache(pack) for index, pack in (prepack or {}).items()}
        if before is None and after is None and not self.prepack:
            raise ConfigError(
                f"kernelpick.processed({choice.name}) was given no processing: pass before=, after= or "
                "prepack=, or use the choice itself"
            )
        steps = [f"prepack {i}: {_short_name(c.pack)}" for i, c in sorted(self.prepack.items())]
        steps += [f"{label}: {_short_name(fn)}" for label, fn in functions.items() if fn is not None]
        self.steps = "; ".join(steps)
        self.user_name = name
        self.name = name or f"{choice.name} [{self.steps}]"
        self.identity = short_hash(
            "processing",
            *("" if fn is None else function_identity(fn) for fn in (before, after)),
            *(f"{i}:{function_identity(c.pack)}" for i, c in sorted(self.prepack.items())),
        )
        self._prepare = self._prepacker()
        self._lock = threading.Lock()
        self._inner_signatures: dict[Signature, Signature] = {}
        # Per example: the processed inputs its choices compile for (None: the processing raised on it).
        self._examples: weakref.WeakKeyDictionary[Example, Prepared | None] = weakref.WeakKeyDictionary()

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        """The wrapped space's choices for the processed inputs, each wrapped.

        Raises:
            ConfigError: a pre-packed input is missing or not a tensor, or `before` does not return a
                tuple of inputs.
        """
        count = len(signature.inputs)
        for index in self.prepack:
            if index >= count:
                raise ConfigError(
                    f"processed choice `{self.name}` pre-packs input {index}, but the call has {count} "
                    f"input{'s' if count != 1 else ''} {signature}: prepack keys are positional input "
                    "indices, counted from 0"
                )
            if not isinstance(signature.inputs[index], TensorSpec):
                raise ConfigError(
                    f"processed choice `{self.name}` pre-packs input {index}, a "
                    f"{type(signature.inputs[index]).__name__}: only tensors can be pre-packed (packed "
                    "forms are kept by tensor identity and version)"
                )
        try:
            inner_signature = self.inner_signature(signature)
        except ConfigError:
            raise
        except Exception as error:  # the processing cannot run for these inputs: recorded, never run
            message = f"processing {self.steps} raised on inputs {signature}: {classify_run_error(error)[1]}"
            digest = short_hash("processed-failed", self.inner.name, self.identity, str(signature))
            return [UnavailableChoice(self.name, digest, "runtime_error", message)]
        return [
            ProcessedChoice(self, c, signature, inner_signature)
            for c in self.inner.choices_for(inner_signature)
        ]

    def inner_signature(self, signature: Signature) -> Signature:
        """The signature of what the wrapped choice receives for calls of `signature`: the processing run
        once per signature (a tuning asks again for its reference) on fake tensors, else on example inputs."""
        try:
            found = self._inner_signatures.get(signature)
        except TypeError:  # an unhashable argument (a list): nothing to remember it by
            return self._processed_signature(signature)
        if found is not None:
            return found
        made = self._processed_signature(signature)
        with self._lock:
            return self._inner_signatures.setdefault(signature, made)

    def _processed_signature(self, signature: Signature) -> Signature:
        from torch._subclasses.fake_tensor import FakeTensorMode

        inputs: tuple[Any, ...] = signature.inputs
        process = self._prepacker(cached=False)  # these inputs are thrown away: their packs are too
        if process is not None:
            try:
                with FakeTensorMode(allow_non_fake_inputs=True):
                    result = _described(process(*[_fake(v) for v in inputs]))
            except Exception as error:
                failed = "%s: processing on fake tensors failed (%s); running it on example inputs"
                log.debug(failed, self.name, error)
                devices = [v.device for v in inputs if isinstance(v, TensorSpec)]
                generator = example_generator(devices[0] if devices else torch.device("cpu"))
                values = [example_tensor(v, generator) if isinstance(v, TensorSpec) else v for v in inputs]
                result = _described(process(*values))
            if not isinstance(result, (tuple, list)):
                raise ConfigError(
                    f"`before` of processed choice `{self.name}` must return the wrapped choice's inputs as a "
                    f"tuple, got a {type(result).__name__}: return (x,) for a single input"
                )
            inputs = tuple(result)
        kwargs = tuple((k, v) for k, v in signature.kwargs if self._passes(k))
        return Signature(inputs, kwargs, signature.user_key, signature.device)

    def _passes(self, keyword: str) -> bool:
        """Whether `keyword` reaches the wrapped choice: not `out` when `after` makes the output."""
        return not (keyword == "out" and self.after is not None)

    def _prepacker(self, cached: bool = True) -> Before | None:
        """`prepare(*inputs)`: pre-packing (from the cache unless not `cached`), then `before`; `before`
        itself when nothing is pre-packed, so that a call runs it unwrapped (None: only `after` processes)."""
        prepacked = tuple((index, c.get if cached else c.pack) for index, c in self.prepack.items())
        before = self.before
        if not prepacked:
            return before

        def packed(*inputs: Any) -> Sequence[Any]:
            values = list(inputs)
            for index, pack in prepacked:
                values[index] = pack(values[index])
            return before(*values) if before is not None else values

        return packed

    def prepared(self, example: Example) -> Prepared | None:
        """`example`'s inputs as the wrapped choice receives them, processed once for all its choices
        (each config of a template compiles for the same ones); None when the processing raised."""
        with self._lock:  # one processing per example, even when choices compile in several threads
            if example in self._examples:
                return self._examples[example]
            done: Prepared | None = None
            try:
                args = tuple(example.args if self._prepare is None else self._prepare(*example.args))
                done = args, {k: v for k, v in example.kwargs.items() if self._passes(k)}
            except Exception as error:
                log.debug("%s: processing the example inputs raised %s", self.name, error)
            self._examples[example] = done  # kept while `example` lives, which it does not refer to
            return done

    def call_with(self, call: Callable[..., Any]) -> Callable[..., Any]:
        """The hot path of a processed choice: prepare the inputs, `call`, then `after` (its new output
        copied into `out=`, which `copy_` returns, where the caller gave one); one closure per combination
        of steps, so that a call runs the user's functions and no wrapper of them."""
        prepare, after = self._prepare, self.after
        if after is None:
            assert prepare is not None  # a processed choice processes something

            def run_prepared(*inputs: Any, **kwargs: Any) -> Any:
                return call(*prepare(*inputs), **kwargs)

            return run_prepared
        if prepare is None:

            def then_after(*inputs: Any, out: Any = None, **kwargs: Any) -> Any:
                result = after(call(*inputs, **kwargs))
                return result if out is None else out.copy_(result)

            return then_after

        def prepared_then_after(*inputs: Any, out: Any = None, **kwargs: Any) -> Any:
            result = after(call(*prepare(*inputs), **kwargs))
            return result if out is None else out.copy_(result)

        return prepared_then_after

    def __repr__(self) -> str:
        return f"processed({self.inner!r}, {self.steps})"


class ProcessedChoice:
    """One choice of the wrapped space, with the processing around it, for one signature."""

    def __init__(
        self, space: ProcessedChoices, inner: Choice, signature: Signature, inner_signature: Signature
    ) -> None:
        self.space, self.inner = space, inner
        self.signature, self.inner_signature = signature, inner_signature
        # `name=` in place of the wrapped space's name
        if space.user_name is None:
            self.name = f"{inner.name} [{space.steps}]"
        elif inner.name.startswith(space.inner.name):
            self.name = space.user_name + inner.name[len(space.inner.name) :]
        else:
            self.name = f"{space.user_name} {inner.name}"
        self.digest = short_hash("processed", inner.digest, space.identity, self.name)

    def searched_as(self) -> tuple[Config, int, str] | None:
        """The innermost choice's config, in this processed space (the outermost, when nested)."""
        placed = searched_as(self.inner)
        return None if placed is None else (placed[0], id(self.space), self.space.name)

    def description(self) -> dict[str, Any]:
        space = self.space
        return {
            "kind": "processed",
            "name": self.name,
            "choice": self.inner.description(),
            "before": None if space.before is None else qualified_name(space.before),
            "after": None if space.after is None else qualified_name(space.after),
            "prepack": {str(i): qualified_name(c.pack) for i, c in sorted(space.prepack.items())},
        }

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        """Compile the wrapped choice for the processed example inputs, pre-packed now (no timed run does)."""
        prepared = self.space.prepared(example)
        if prepared is None:
            # Not a compile failure: the first run raises the same and is recorded as a runtime error.
            return CompileOutcome("ok")
        return self.inner.compile_job(Example(*prepared, written=()), self.inner_signature)

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        inner_signature = (
            self.inner_signature if signature == self.signature else self.space.inner_signature(signature)
        )
        return self.space.call_with(self.inner.callable_for(inner_signature))

    def __repr__(self) -> str:
        return f"processed({self.inner!r}, {self.space.steps})"


#: `kernelpick.processed(...)`: the public name of a processed choice (the class documents its arguments).
processed = ProcessedChoices


def _short_name(fn: Any) -> str:
    target = getattr(fn, "func", fn)  # functools.partial
    return str(getattr(target, "__name__", None) or type(target).__name__)


def _fake(value: Any) -> Any:
    if not isinstance(value, TensorSpec):
        return value
    storage = torch.empty(max(value.storage_length, 1), dtype=value.dtype, device=value.device)
    return storage.as_strided(value.size, value.stride, value.offset)


def _described(value: Any) -> Any:
    """`value` with every tensor replaced by its `TensorSpec`."""
    if isinstance(value, torch.Tensor):
        return TensorSpec.of(value)
    if isinstance(value, (tuple, list)):  # a named tuple too, as a plain one
        described = [_described(v) for v in value]
        return described if isinstance(value, list) else tuple(described)
    return value

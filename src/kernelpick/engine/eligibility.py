"""Which choices a device may run: a choice space's declared `Requirements`, checked before compiling."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelpick.device import DeviceInfo, Requirements
from kernelpick.engine.choice import Choice, ChoiceSpace
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError
from kernelpick.store.table import TableEntry


@dataclass(frozen=True, slots=True)
class SkippedChoice:
    """A choice space a selector did not try on a device, and why (its unmet requirement)."""

    name: str
    reason: str


def requirements_of(space: object) -> Requirements | None:
    """The requirements a choice space declares (its `requires` attribute), or None."""
    requires = getattr(space, "requires", None)
    return requires if isinstance(requires, Requirements) else None


def eligible_spaces(
    spaces: Iterable[ChoiceSpace], device: DeviceInfo
) -> tuple[list[ChoiceSpace], tuple[SkippedChoice, ...]]:
    """The spaces whose requirements `device` meets, and the others with the reason for each."""
    kept: list[ChoiceSpace] = []
    skipped: list[SkippedChoice] = []
    for space in spaces:
        requires = requirements_of(space)
        reason = None if requires is None else requires.unmet(device)
        if reason is None:
            kept.append(space)
        else:
            skipped.append(SkippedChoice(space.name, reason))
    return kept, tuple(skipped)


class RequiringSpace:
    """A choice space offered only on devices that meet `requires` (see `require`)."""

    def __init__(self, space: ChoiceSpace, requires: Requirements) -> None:
        if not isinstance(space, ChoiceSpace):
            raise ConfigError(
                f"kernelpick.require expects a choice (extern, triton_choice or template), got {space!r}"
            )
        self.space, self.requires, self.name = space, requires, space.name

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        return self.space.choices_for(signature)

    def __repr__(self) -> str:
        return f"require({self.space!r}, {self.requires.text()})"


def require(space: ChoiceSpace, requires: Requirements | None = None, **needs: Any) -> RequiringSpace:
    """`space`, offered only on devices that meet the requirements; elsewhere skipped, saying why.

    Example: `kernelpick.require(kernelpick.triton_choice(tma_kernel, ...), min_capability=(9, 0))`.

    Args:
        space: an `extern`, `triton_choice` or `template`.
        requires: a `Requirements`; or give its fields as keywords (`gpu`, `min_capability`,
            `big_gpu`, `tma`, `min_shared_memory`).

    Raises:
        ConfigError: `space` is not a choice, or a keyword is not a requirement.
    """
    if requires is None:
        try:
            requires = Requirements(**needs)
        except TypeError:
            known = ", ".join(Requirements.__dataclass_fields__)
            raise ConfigError(f"kernelpick.require takes {known}; got {', '.join(sorted(needs))}") from None
    elif needs:
        raise ConfigError("kernelpick.require takes a Requirements or keywords, not both")
    return RequiringSpace(space, requires)


def tabled_choice(spaces: Sequence[ChoiceSpace], signature: Signature, entry: TableEntry) -> Choice | None:
    """The choice a deployment table's entry names among `spaces`: by its digest, else by its name. A
    space that can find one choice by its description (`choice_for`: a template's) makes only that one."""
    name = str(entry.choice.get("name"))
    for space in spaces:
        finder = getattr(space, "choice_for", None)
        candidates = [finder(signature, entry.choice)] if finder is not None else space.choices_for(signature)
        for choice in candidates:
            if choice is not None and (choice.digest == entry.candidate or choice.name == name):
                return choice
    return None

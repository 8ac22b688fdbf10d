"""The `kernelpick code NAME` command: the source of a stored choice, read back as text."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpick.cli.cache import STORE_HELP, existing_store, store_path
from kernelpick.engine.modules import kept_file, source_hash
from kernelpick.errors import StoreError
from kernelpick.store.base import StoredRow
from kernelpick.store.text import candidate_name, inputs_text


@dataclass(frozen=True, slots=True)
class ChoiceCode:
    """One stored candidate's source: where it was looked for, the text (None when not found) and why
    not, for people."""

    row: StoredRow
    name: str
    kind: str  # "template", "triton", "extern", "config" (an autotuned kernel's) or another choice's kind
    path: Path | None
    source: str | None
    missing: str

    def to_dict(self) -> dict[str, Any]:
        result = self.row.result
        return {
            "kernel": self.row.key.kernel,
            "key": self.row.key.digest,
            "inputs": list(self.row.key.inputs),
            "candidate": self.row.candidate,
            "name": self.name,
            "kind": self.kind,
            "picked": self.row.picked,
            "status": result.status,
            "ms_per_call": result.cost_ms if result.ok else None,
            "description": dict(self.row.description),
            "path": None if self.path is None else str(self.path),
            "source": self.source,
            "missing": self.missing or None,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", metavar="NAME", help="the selector or kernel, as `kernelpick cache list` names it"
    )
    parser.add_argument(
        "--key",
        metavar="PREFIX",
        help="only the tuned key whose digest starts so (`cache list` shows 12 digits)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--choice", metavar="TEXT", help="the candidates whose name contains TEXT, not the pick"
    )
    which.add_argument("--all", action="store_true", help="every stored candidate, not only the pick")
    parser.add_argument("--store", metavar="PATH", help=STORE_HELP)
    parser.add_argument("--json", action="store_true", help="print a JSON list")


def run_code(args: argparse.Namespace) -> int:
    found = stored_code(store_path(args), args.name, key=args.key, choice=args.choice, every=args.all)
    if args.json:
        print(json.dumps([code.to_dict() for code in found], indent=2))
        return 0
    for index, code in enumerate(found):
        if index:
            print()
        print(_header(code))
        print(code.source if code.source is not None else f"# {code.missing}")
    return 0


def stored_code(
    store: Path, name: str, *, key: str | None = None, choice: str | None = None, every: bool = False
) -> list[ChoiceCode]:
    """The source of `name`'s stored candidates: each key's pick, or those named like `choice`, or all.

    Rendered templates and kept kernel sources are looked for beside the store (`templates/` and
    `kernels/` in its folder, as in the cache dir).

    Raises:
        StoreError: there is no store at `store`, it holds nothing of `name` (the message lists what it
            holds), no key starts with `key`, or no candidate's name contains `choice`.
    """
    from kernelpick.store.maintenance import readable_rows, summarize_keys, unknown_kernel
    from kernelpick.store.sqlite import SQLiteStore

    opened = SQLiteStore(existing_store(store))
    try:
        rows = readable_rows(opened)[0]
    finally:
        opened.close()
    mine = [r for r in rows if r.key.kernel == name]
    if not mine:
        raise unknown_kernel(name, (r.key.kernel for r in rows))
    if key:
        keys = {r.key.digest for r in mine}
        mine = [r for r in mine if r.key.digest.startswith(key)]
        if not mine:
            listed = ", ".join(sorted(k[:12] for k in keys))
            raise StoreError(f"no key of {name} starts with {key!r}; its keys: {listed}")
    if every:
        chosen = sorted(mine, key=lambda r: (r.key.digest, r.result.cost_ms))
    elif choice is not None:
        chosen = [r for r in mine if choice in candidate_name(r.description)]
        if not chosen:
            names = ", ".join(sorted({candidate_name(r.description) for r in mine}))
            raise StoreError(
                f"no stored candidate of {name} is named like {choice!r}; its candidates: {names}"
            )
    else:  # each key's pick; the fastest where no pick was recorded
        chosen = [
            s.picked or min((r for r in mine if r.key == s.key), key=lambda r: r.result.cost_ms)
            for s in summarize_keys(mine)
        ]
    return [source_of(row, store.parent) for row in chosen]


def source_of(row: StoredRow, cache: Path) -> ChoiceCode:
    """The source of one stored candidate, looked for under the cache folder `cache`.

    Only there, by the hash its row names: a row naming another path (`../`, an absolute one) is
    shown as not kernelpick's. What is read is text, never imported or run.
    """
    description = row.description
    kind = str(description.get("kind", "config" if "kwargs" in description else "unknown"))
    name = candidate_name(description)
    try:
        if kind == "template":
            digest = str(description.get("source_sha256", ""))
            return _read(
                row, name, kind, kept_file("templates", digest, cache), digest, "rendered template module"
            )
        if kind in ("triton", "config"):
            # A triton_choice names its kernel's cache key; an autotuned kernel's key ends with it.
            cache_key = (
                str(description.get("source", "")) if kind == "triton" else row.key.source.rpartition(":")[2]
            )
            if not cache_key:
                return ChoiceCode(
                    row, name, kind, None, None, "no kernel source kept: tuned by an older kernelpick"
                )
            found = _read(row, name, kind, kept_file("kernels", cache_key, cache), None, "kernel source")
            config = description.get("config", description)
            return _with_config(found, config)
    except ValueError as error:  # a stored hash that is none: it must not name a file elsewhere
        return ChoiceCode(
            row, name, kind, None, None, f"the stored row's source is not kernelpick's: {error}"
        )
    if kind == "extern":
        what = description.get("callable", name)
        return ChoiceCode(row, name, kind, None, None, f"{what} is a library function: no Triton source")
    return ChoiceCode(row, name, kind, None, None, f"a {kind} choice has no source kernelpick keeps")


def _read(row: StoredRow, name: str, kind: str, path: Path, digest: str | None, what: str) -> ChoiceCode:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ChoiceCode(
            row,
            name,
            kind,
            path,
            None,
            f"the {what} is not at {path}: tuning it again (after `kernelpick cache "
            "prune --kernel`) writes it, or it was tuned with another KERNELPICK_CACHE_DIR",
        )
    if digest is not None and source_hash(text) != digest:
        return ChoiceCode(
            row, name, kind, path, None, f"the {what} at {path} is not the one stored (its hash differs)"
        )
    return ChoiceCode(row, name, kind, path, text, "")


def _with_config(code: ChoiceCode, config: Any) -> ChoiceCode:
    """The kernel source with the config it runs with, as a comment above it."""
    line = f"# config: {json.dumps(config, sort_keys=True)}"
    if code.source is None:
        return ChoiceCode(code.row, code.name, code.kind, code.path, None, f"{code.missing}\n{line}")
    return ChoiceCode(code.row, code.name, code.kind, code.path, f"{line}\n{code.source}", "")


def _header(code: ChoiceCode) -> str:
    result = code.row.result
    how = f"{result.cost_ms:.4f} ms" if result.ok else result.status
    lines: Sequence[str] = (
        f"# {code.row.key.kernel} ({inputs_text(code.row.key.inputs, limit=80)}) on {code.row.key.device}, key {code.row.key.digest[:12]}",
        f"# {code.kind} {code.name}: {how}" + ("; picked" if code.row.picked else ""),
        *([f"# from {code.path}"] if code.source is not None and code.path is not None else []),
    )
    return "\n".join(lines)

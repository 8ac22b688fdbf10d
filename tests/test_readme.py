"""The README and the pages of docs/ are right: every example runs, every command line works, every
link leads somewhere.

- Each ```python block, in README.md or docs/*.md, runs on its own, in a new process on the CPU, with
  an empty store. A block whose first line mentions TRITON_INTERPRET=1 runs with it set; no other does.
- The ```bash and ```console blocks run in order (README.md's, then each page of docs/ by name), in
  one folder with one store, as a user would type them (so the `kernelpick demo` of the README fills
  the store that `kernelpick code` reads in docs/reports.md). A ```console block shows `$ command`
  and its output: the output must match.
- Every `kernelpick ...` line, in any block, names a real command and options it takes, and
  docs/cli.md names every command.
- A block marked on the line before by `<!-- fragment ... -->` or `<!-- not run: why -->` is not run.
- Every relative link of README.md and docs/*.md leads to a file that exists, and to a heading
  there when it names one; docs/index.md leads to every page of docs/; the settings table of
  docs/settings.md is the one `kernelpick.settings` describes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.cli.commands import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: Where the README sends a reader for every command, and for every setting.
CLI_PAGE = ROOT / "docs" / "cli.md"
SETTINGS_PAGE = ROOT / "docs" / "settings.md"
#: Lines the README may have: past this it is a reference again, and reference belongs in docs/.
README_MOST_LINES = 450
NOT_RUN = ("fragment", "not run")
#: Seconds any one block may take: the slowest runs in about 10 s on a 2-core CPU.
BLOCK_TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown file."""

    path: Path
    language: str
    code: str
    line: int  # of the opening fence, counted from 1
    mark: str  # the HTML comment on the line before the fence, without `<!--` and `-->`

    @property
    def runs(self) -> bool:
        return not self.mark.startswith(NOT_RUN)

    @property
    def interpreted(self) -> bool:
        first = self.code.splitlines()[0] if self.code else ""
        return first.startswith("#") and "TRITON_INTERPRET=1" in first

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"```(\w*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = lines[index - 1].strip() if index else ""
        mark = before[4:-3].strip() if before.startswith("<!--") and before.endswith("-->") else ""
        code = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(Block(path, opening.group(1), code, index + 1, mark))
        index = end + 1
    return blocks


README_BLOCKS = fenced_blocks(README)
BLOCKS = README_BLOCKS + [block for page in DOCS for block in fenced_blocks(page)]
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL = [b for b in BLOCKS if b.language in ("bash", "console")]


def environment(cache: Path, interpreted: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELPICK_")}
    env.pop("TRITON_INTERPRET", None)
    if interpreted:
        env["TRITON_INTERPRET"] = "1"
    env["KERNELPICK_CACHE_DIR"] = str(cache)
    # Inductor's caches too, as on a new machine: a compiled graph found there holds the picks of the
    # process that compiled it, and the block's own selections would not run.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache.parent / "inductor-cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["COLUMNS"] = "200"
    return env


def run_python(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True)
    script = (
        folder / f"{block.path.stem.lower()}_line_{block.line}.py"
    )  # triton.jit reads its kernels' source
    script.write_text(block.code)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        env=environment(folder / "cache", block.interpreted),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )


def console_commands(code: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of each `$ ` prompt in a console block."""
    commands: list[tuple[str, list[str]]] = []
    lines = iter(code.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + " " + next(lines).strip()
            commands.append((command, []))
        elif commands:
            commands[-1][1].append(line.rstrip())
    return commands


def run_shell_session(folder: Path) -> dict[str, str | None]:
    """Run every shell block in order in `folder`; the failure of each (None when it worked)."""
    folder.mkdir(parents=True)
    for shared in ("examples", "tests"):  # the README's commands name files of the repository
        (folder / shared).symlink_to(ROOT / shared)
    env = environment(folder / "cache")
    failures: dict[str, str | None] = {}
    for block in SHELL:
        if not block.runs:
            continue
        failures[str(block)] = None
        if block.language == "bash":
            steps = [(block.code, None)]
        else:
            steps = [(command, expected) for command, expected in console_commands(block.code)]
        for script, expected in steps:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT,
            )
            if done.returncode != 0:
                failures[str(block)] = (
                    f"exit {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
                )
                break
            got = [line.rstrip() for line in done.stdout.splitlines() if line.strip()]
            if expected is not None and got != [line for line in expected if line]:
                failures[str(block)] = "output differs:\n" + "\n".join(got)
                break
    return failures


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[object]]]:
    """Every block, started at once on two lanes (the suite runs on two cores): the shell session
    on one, the Python blocks on both as they come free."""
    folder = tmp_path_factory.mktemp("readme")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[str, Future[object]] = {"shell": pool.submit(run_shell_session, folder / "shell")}
        for block in PYTHON:
            if block.runs:
                place = folder / f"python-{block.path.stem}-{block.line}"
                futures[str(block)] = pool.submit(run_python, block, place)
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("block", [b for b in PYTHON if b.runs], ids=str)
def test_python_example_runs(block: Block, started: dict[str, Future[object]]) -> None:
    done = started[str(block)].result()
    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == 0, f"{block} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", [b for b in SHELL if b.runs], ids=str)
def test_shell_example_runs(block: Block, started: dict[str, Future[object]]) -> None:
    failures = started["shell"].result()
    assert isinstance(failures, dict)
    assert failures[str(block)] is None, f"{block}: {failures[str(block)]}"


def test_only_few_blocks_are_left_unrun() -> None:
    """Fragments are the exception: every Python example runs but a torchrun job's, and of the shell
    blocks only install commands do not."""
    unrun = [b for b in BLOCKS if not b.runs]
    assert len(unrun) <= 4, [str(b) for b in unrun]
    assert all(b.language in ("bash", "python") for b in unrun)
    assert [b for b in BLOCKS if b.language == "python" and b.interpreted], (
        "no block shows TRITON_INTERPRET=1"
    )


# --- command lines ----------------------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def documented_command_lines() -> list[tuple[Block, str]]:
    """Every line of a shell or text block that runs `kernelpick`, with its variables and prompt cut."""
    found = []
    for block in BLOCKS:
        if block.language not in ("bash", "console", "text"):
            continue
        code = re.sub(r"\\\n\s*", " ", block.code)
        for line in code.splitlines():
            line = re.sub(r"^\s*(\$ )?([A-Z_]+=\S*\s+)*", "", line)  # the prompt and variables set
            if line.startswith("kernelpick "):
                # a synopsis explains a command after two spaces or more, a shell line after `#`
                found.append((block, re.split(r"\s{2,}|\s#", line)[0]))
    return found


COMMAND_LINES = documented_command_lines()


@pytest.mark.parametrize(
    ("block", "line"), COMMAND_LINES, ids=[f"{b}:{line[:40]}" for b, line in COMMAND_LINES]
)
def test_documented_command_exists_with_its_options(block: Block, line: str) -> None:
    parser = build_parser()
    words = line.split()
    command = subcommands(parser).get(words[1])
    assert command is not None, f"{block}: `kernelpick {words[1]}` is no command"
    nested = subcommands(command)
    if nested:  # `kernelpick cache list|show|...`
        names = words[2].split("|")
        assert all(name in nested for name in names), f"{block}: {line}"
        valid = set().union(*(options(nested[name]) for name in names))
    else:
        valid = options(command)
    named = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line)
    unknown = sorted(set(named) - valid)
    assert not unknown, f"{block}: `{line}` uses {unknown}; `kernelpick {words[1]}` takes {sorted(valid)}"


def test_every_command_is_documented_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    text = CLI_PAGE.read_text()
    parser = build_parser()
    for name, command in subcommands(parser).items():
        assert f"kernelpick {name}" in text, f"`kernelpick {name}` is not in {CLI_PAGE.name}"
        names = [[name, nested] for nested in subcommands(command)] or [[name]]
        for words in names:
            with pytest.raises(SystemExit) as exit_:
                parser.parse_args([*words, "--help"])
            assert exit_.value.code == 0
            assert "usage: " in capsys.readouterr().out


def test_the_two_set_up_commands_are_make_targets() -> None:
    setup = next(b for b in README_BLOCKS if "make demo" in b.code)
    assert [line.split("#")[0].strip() for line in setup.code.splitlines()] == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


# --- settings -----------------------------------------------------------------------------------


def settings_table() -> list[str]:
    return [f"| `{env}` | `{default}` | {doc} |" for env, default, doc in settings.describe()]


def test_settings_table_is_generated_from_the_settings() -> None:
    lines = SETTINGS_PAGE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line == "| variable | default | meaning |") + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    expected = "\n".join(settings_table())
    assert lines[start:end] == settings_table(), (
        f"replace the table of {SETTINGS_PAGE.name} with:\n{expected}"
    )


def test_every_variable_named_exists() -> None:
    known = {env for env, _, _ in settings.describe()}
    for path in [README, *DOCS]:
        named = set(re.findall(r"KERNELPICK_[A-Z_]*[A-Z]", path.read_text()))
        assert named <= known, f"{path.name} names {sorted(named - known)}, which are no settings"


# --- links ----------------------------------------------------------------------------------------


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    found: set[str] = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchor, count = slug, 1
        while anchor in found:
            anchor, count = f"{slug}-{count}", count + 1
        found.add(anchor)
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_lead_somewhere(path: Path) -> None:
    broken = []
    for link in links(path):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link}: no such heading")
    assert not broken, f"{path.name}: {broken}"


def test_every_page_of_docs_is_reached_from_the_readme_through_the_index() -> None:
    assert "docs/index.md" in links(README), "the README does not link docs/index.md"
    listed = {
        (ROOT / "docs" / link.partition("#")[0]).resolve() for link in links(ROOT / "docs" / "index.md")
    }
    unlisted = [page.name for page in DOCS if page.name != "index.md" and page.resolve() not in listed]
    assert not unlisted, f"docs/index.md does not link {unlisted}"


def test_the_readme_stays_a_short_user_document() -> None:
    count = len(README.read_text().splitlines())
    assert count <= README_MOST_LINES, (
        f"README.md has {count} lines, more than {README_MOST_LINES}: move reference material to docs/"
    )

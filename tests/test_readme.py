"""The README stays true: its example spec is the file, and it shows every CLI command and
option and every public SDK call, so none can be added undocumented."""

from __future__ import annotations

import inspect
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from typer.main import get_command

import foldwise
from foldwise.cli import app
from foldwise.client import Client, Study

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHELL = {"sh", "shell", "bash", "console"}
# Options Typer adds to every app, and the one every command repeats (shown once, globally).
NOT_SHOWN_PER_COMMAND = {"--help", "--install-completion", "--show-completion", "--url"}
EXAMPLE_FILE = re.compile(r"`(examples/[\w./-]+\.ya?ml)`")


def fences(text: str, languages: set[str]) -> list[str]:
    """The contents of the README's fenced code blocks in ``languages``."""
    tokens = MarkdownIt("commonmark").parse(text)
    return [
        token.content
        for token in tokens
        if token.type == "fence" and token.info.split()[:1] and token.info.split()[0] in languages
    ]


def labelled_yaml(text: str) -> Iterator[tuple[str, str]]:
    """(file, block) for each YAML block whose paragraph just above names an example file, as
    in "A study is one document (`examples/digits.yaml`):"; the last file named is its label."""
    tokens = MarkdownIt("commonmark").parse(text)
    for i, token in enumerate(tokens):
        if token.type != "fence" or token.info.split()[:1] != ["yaml"] or i < 2:
            continue
        above = tokens[i - 2]
        named = EXAMPLE_FILE.findall(above.content) if above.type == "inline" else []
        if named:
            yield named[-1], token.content


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """Every command under ``group`` (Typer's Click-style command tree) as ("token create",
    command), sub-apps walked."""
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        if hasattr(command, "commands"):  # a group: `db`, `token`
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def options(command: Any) -> list[list[str]]:
    """Each option's spellings (``["--output", "-o"]``, ``["--wait", "--no-wait"]``)."""
    return [
        [*param.opts, *param.secondary_opts]
        for param in command.params
        if param.param_type_name == "option" and not param.hidden
    ]


def value_options(command: Any) -> set[str]:
    """The spellings of ``command``'s options that take a value (``--sort best``)."""
    return {
        spelling
        for param in command.params
        if param.param_type_name == "option" and not param.is_flag
        for spelling in param.opts
    }


ROOT_COMMAND = get_command(app)
GLOBAL_VALUES = value_options(ROOT_COMMAND)


def read_line(line: str) -> tuple[str, list[str], list[str]] | None:
    """(command path, global options, its options) of a shell line that runs ``foldwise``
    (``.venv/bin/foldwise`` too), else None; the path is as far as it names commands
    ("token create"); a comment is not read."""
    words = shlex.split(line, comments=True)
    if not words or Path(words[0]).name != "foldwise":
        return None
    words, before = words[1:], []
    while words and words[0].startswith("-"):
        before.append(words[0])
        words = words[2:] if words[0] in GLOBAL_VALUES else words[1:]
    node, path = ROOT_COMMAND, []
    while words and hasattr(node, "commands") and words[0] in node.commands:
        node = node.commands[words[0]]
        path.append(words.pop(0))
    takes_value, used = value_options(node), []
    while words:
        word = words.pop(0)
        if word.startswith("-"):
            used.append(word.split("=")[0])
            if word in takes_value and words:  # its value: `--sort -value` is no option
                words.pop(0)
    return " ".join(path), before, used


def shown_commands(text: str) -> dict[str, list[str]]:
    """The ``foldwise ...`` lines of the README's shell blocks, by the command path they run
    ("trials", "token create", "" for the global options alone)."""
    shown: dict[str, list[str]] = {}
    for block in fences(text, SHELL):
        last: list[str] | None = None  # the lines of the command the previous line ran
        for line in block.splitlines():
            if last is not None and line.lstrip().startswith("#"):  # its comment goes on
                last[-1] += "\n" + line
                continue
            read = read_line(line)
            last = None if read is None else shown.setdefault(read[0], [])
            if last is not None:
                last.append(line)
    return shown


def lines_for(shown: dict[str, list[str]], path: str) -> list[str]:
    """The README lines that run ``path``, or a command under it when it is a group."""
    return [
        line for key, found in shown.items() if f"{key} ".startswith(f"{path} ") for line in found
    ]


def public_members(cls: type) -> list[str]:
    return sorted(name for name, _ in inspect.getmembers(cls) if not name.startswith("_"))


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_example_specs_in_the_readme_are_the_files(readme: str) -> None:
    labelled = dict(labelled_yaml(readme))
    assert "examples/digits.yaml" in labelled, "no YAML block labelled examples/digits.yaml"
    for name, block in labelled.items():
        assert block == (ROOT / name).read_text(encoding="utf-8"), f"README's {name} differs"


def shows(text: str, spellings: list[str]) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", text) for s in spellings)


@pytest.mark.parametrize("path", [path for path, _ in commands(ROOT_COMMAND)])
def test_every_cli_command_and_option_is_shown(readme: str, path: str) -> None:
    """Each command on a line of its own; each option on one of the command's lines, or, when
    every command of its group has it (`token ... --database-url`), on one of the group's."""
    every = dict(commands(ROOT_COMMAND))
    shown = shown_commands(readme)
    lines = lines_for(shown, path)
    assert lines, f"README shows no `foldwise {path}` in a shell block"
    group = path.rpartition(" ")[0]
    siblings = [options(c) for p, c in every.items() if group and p.startswith(f"{group} ")]
    missing = []
    for spellings in options(every[path]):
        if set(spellings) & NOT_SHOWN_PER_COMMAND or shows("\n".join(lines), spellings):
            continue
        shared = bool(siblings) and all(spellings in sibling for sibling in siblings)
        if not (shared and shows("\n".join(lines_for(shown, group)), spellings)):
            missing.append(spellings[0])
    assert not missing, f"README's `foldwise {path}` lines show no {missing}"


def test_global_options_are_shown(readme: str) -> None:
    text = "\n".join(line for lines in shown_commands(readme).values() for line in lines)
    for spellings in options(ROOT_COMMAND):
        if set(spellings) & (NOT_SHOWN_PER_COMMAND - {"--url"}):
            continue
        assert shows(text, spellings), f"README shows no `foldwise {spellings[0]}`"


def test_every_shown_command_and_option_exists(readme: str) -> None:
    """No README line runs a command or passes an option the CLI does not have (any more)."""
    every = dict(commands(ROOT_COMMAND))
    known_global = {s for spellings in options(ROOT_COMMAND) for s in spellings}
    wrong = []
    for lines in shown_commands(readme).values():
        for line in lines:
            path, before, after = read_line(line)
            if path not in every and not (path == "" and before and not after):
                wrong.append(f"{line!r}: runs no foldwise command")
                continue
            own = {s for spellings in options(every[path]) for s in spellings} if path else set()
            unknown = [o for o in before if o not in known_global]
            unknown += [o for o in after if o not in own | {"--help"}]
            if unknown:
                wrong.append(f"{line!r}: no option {unknown}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("cls", "name"), [(cls, name) for cls in (Client, Study) for name in public_members(cls)]
)
def test_every_public_sdk_call_is_shown(readme: str, cls: type, name: str) -> None:
    code = "\n".join(fences(readme, {"python"}))
    member = inspect.getattr_static(cls, name)
    pattern = rf"\.{name}\b(?!\()" if isinstance(member, property) else rf"\.{name}\("
    assert re.search(pattern, code), f"README's Python shows no {cls.__name__}.{name}"


@pytest.mark.parametrize("name", [n for n in foldwise.__all__ if not n.startswith("_")])
def test_every_exported_name_is_shown(readme: str, name: str) -> None:
    code = "\n".join(fences(readme, {"python"}))
    assert re.search(rf"\b{name}\b", code), f"README's Python never uses foldwise.{name}"


def test_the_command_tree_is_walked() -> None:
    paths = {path: options(command) for path, command in commands(ROOT_COMMAND)}
    assert {"db upgrade", "token create", "token list", "token revoke", "trials"} <= set(paths)
    assert ["--output", "-o"] in paths["trials"] and ["--wait", "--no-wait"] in paths["stop"]
    assert GLOBAL_VALUES == {"--url", "--token"}


def test_the_checks_can_fail() -> None:
    """The readers above find what is there, and only that."""
    text = (
        "A spec (`examples/digits.yaml`):\n\n```yaml\nname: other\n```\n\n```sh\n"
        "foldwise --url http://x trials 1 --csv  # and -o\n"
        ".venv/bin/foldwise token list --revoked\n  # (--database-url)\nfoldwise tokens list\n"
        "make run\n# not foldwise's\n```\n"
    )
    assert dict(labelled_yaml(text)) == {"examples/digits.yaml": "name: other\n"}
    shown = shown_commands(text)
    assert sorted(shown) == ["", "token list", "trials"]
    assert lines_for(shown, "trials") == ["foldwise --url http://x trials 1 --csv  # and -o"]
    assert lines_for(shown, "token") == [
        ".venv/bin/foldwise token list --revoked\n  # (--database-url)"
    ]
    assert not lines_for(shown, "best")
    assert read_line("foldwise tokens list") == ("", [], [])
    assert read_line("foldwise --token t stop 1 --no-wait") == ("stop", ["--token"], ["--no-wait"])
    assert read_line("foldwise trials 1 --sort -value -o x") == ("trials", [], ["--sort", "-o"])

"""docs/migrating.md stays true to the command line it shows.

Every `corral ...` command of the page (a `$ ` line of a ``console`` block, a line of a ``sh``
block, supervisor's ``command=``) is parsed by `parse_command_line`, as the real command does
first: a command the page shows refused at that stage must be refused with the very line the
page shows, and every other one must parse. Refusals that come later (a config file's
content, an address in use) are not this test's business: the page's sessions were run for
real. Shell-only commands (curl, ps, kill, supervisorctl, ...) are skipped by name, and so is
`corral ctl`, whose client has its own parser.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.config import ConfigError, parse_command_line

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "migrating.md"

FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
CONTROL = set("();&|")  # a token made of these separates two simple commands
REDIRECT = set("<>&")  # ... of these, with a < or >, is a redirection (its target follows)


@dataclass(frozen=True)
class Command:
    line: int  # where the page has it
    args: list[str]  # after `corral`
    environ: dict[str, str]  # the assignments before it
    error: str | None  # the `corral: error: ...` line the page shows right after it, if any


def _blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Fenced blocks: (language, first line number, lines without the fence's indentation)."""
    blocks, current = [], None
    for number, raw in enumerate(text.splitlines(), 1):
        fence = FENCE.match(raw)
        if current is None:
            if fence:
                current = (fence.group(2), number + 1, len(fence.group(1)), [])
            continue
        if fence and len(fence.group(1)) == current[2]:
            blocks.append((current[0], current[1], current[3]))
            current = None
            continue
        current[3].append(raw[current[2] :])
    return blocks


def _shell_lines(language: str, lines: list[str]) -> list[tuple[int, str, list[str]]]:
    """(offset, command, the output lines after it) of one block."""
    found: list[tuple[int, str, list[str]]] = []
    if language == "console":
        for offset, line in enumerate(lines):
            if line.startswith("$ "):
                found.append((offset, line[2:], []))
            elif found:
                found[-1][2].append(line)
    elif language == "sh":
        found = [(o, line, []) for o, line in enumerate(lines) if line and line[0] != "#"]
    elif language == "ini":
        found = [(o, line[8:], []) for o, line in enumerate(lines) if line.startswith("command=")]
    return found


def _simple_commands(line: str) -> list[list[str]]:
    """The words of each simple command of a shell line, redirections left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    skip = False
    for token in lexer:
        if skip:
            skip = False
        elif set(token) <= CONTROL:
            commands.append([])
        elif set(token) <= REDIRECT and set(token) & set("<>"):
            skip = True  # its target
            words = commands[-1]
            if words and words[-1].isdigit() and re.search(rf"(?<!\S){words[-1]}[<>]", line):
                words.pop()  # the descriptor of 2>..., not an argument
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def corral_commands() -> list[Command]:
    commands = []
    for language, first, lines in _blocks(PAGE.read_text()):
        for offset, line, output in _shell_lines(language, lines):
            errors = [out for out in output if out.startswith("corral: error: ")]
            for words in _simple_commands(line):
                environ = {}
                while words and ASSIGNMENT.match(words[0]):
                    name, _, value = words.pop(0).partition("=")
                    environ[name] = value
                if not words or Path(words[0]).name != "corral" or words[1:2] == ["ctl"]:
                    continue  # shell-only: curl, ps, kill, supervisorctl, nginx, ab, ...
                error = errors[0] if errors else None
                commands.append(Command(first + offset, words[1:], environ, error))
    return commands


COMMANDS = corral_commands()


def test_the_page_has_the_commands_this_test_reads():
    # if the extraction broke, the parametrized test below would check nothing
    assert len(COMMANDS) >= 15
    assert any(command.environ for command in COMMANDS)  # GUNICORN_CMD_ARGS=...
    assert sum(command.error is not None for command in COMMANDS) >= 5
    assert any(c.args[:1] == ["examples.whoami:application"] for c in COMMANDS)  # the ini's


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"line {c.line}")
def test_each_corral_command_of_the_page_parses_as_shown(command: Command):
    try:
        parsed = parse_command_line(command.args, environ=command.environ)
    except ConfigError as exc:
        assert f"corral: error: {exc}" == command.error, (command.args, command.line)
        return
    app = parsed.given.get("app")
    if app is not None and str(app.value).startswith("examples."):
        module = str(app.value).split(":")[0].replace(".", "/")
        assert (ROOT / f"{module}.py").is_file(), f"line {command.line}: no {module}.py"


def test_the_vassals_and_unit_files_name_examples_that_exist():
    text = PAGE.read_text()
    named = set(re.findall(r'"(?:module|app)": "(examples\.\w+)"', text))
    named |= set(re.findall(r'app = \\?"(examples\.\w+)\\?"', text))
    assert {"examples.hello", "examples.echo", "examples.whoami"} <= named
    for module in named:
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module

"""The command line's parser: argparse over the flags `SETTINGS` declare, and the other
servers' flags corral does not declare (Gunicorn's, Uvicorn's, Granian's), known to it but
hidden from ``--help``; the ``--help`` text's layout; the words a flag whose value is optional
leaves to the APP (`with_constants`). `corral.config.sources` turns what it parsed into given
settings. argparse is imported here only (through `corral.config.sources`), so workers that
import `corral.config` do not pay for it.
"""

import argparse
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any, NoReturn

from corral import __version__
from corral.config import granian, gunicorn_names, peers, uvicorn
from corral.config.document import did_you_mean
from corral.config.errors import ConfigError, show
from corral.config.settings import SECTIONS, SETTINGS, Action, Setting


class Parser(argparse.ArgumentParser):
    """argparse that raises one-line `ConfigError`s instead of printing usage and exiting."""

    # while the flags are added: argparse checks each one's metavar with a formatter, whose
    # width (the terminal's) needs `shutil`, an import the master (and so every worker forked
    # from it) would keep; the help text asks the terminal's, as argparse does
    adding = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self.adding:
            return argparse.HelpFormatter(self.prog, width=80)
        return super()._get_formatter()

    def error(self, message: str) -> NoReturn:
        prefix, sep, rest = message.partition(": ")
        if sep and prefix.startswith("argument "):
            flags = prefix.removeprefix("argument ").split("/")
            flag = next((f for f in flags if f.startswith("--")), flags[0])
            if rest.startswith("expected one argument"):
                rest = "expected a value"
            elif rest.startswith("ignored explicit argument"):
                rest = "takes no value"
            message = f"{flag}: {rest}"
        raise ConfigError(message)


def flag_of(setting: Setting) -> str:
    if setting.action is Action.POSITIONAL:
        return setting.metavar or setting.name.upper()
    return next((f for f in setting.flags if f.startswith("--")), setting.flags[0])


def unexpected(arg: str, argv: Sequence[str], bare: Iterable[int] = ()) -> ConfigError:
    """The error for a word the parser left over (`arg`), in `argv` as `with_constants` wrote
    it; `bare` are the places of the optional-value flags it gave their constant."""
    if arg.startswith("-") and len(arg) > 1:
        name = arg.partition("=")[0]
        return ConfigError(f"{name}: unknown option{did_you_mean(name, declared_flags())}")
    for index in bare:  # the word after it, not its value, took the APP's place
        flag = argv[index].partition("=")[0]
        setting = optional_flags()[flag]
        word = argv[index + 1] if index + 1 < len(argv) else "-"
        if word.startswith("-"):
            continue
        if setting.values:
            return ConfigError(f"{flag}: expected {setting.expected}, got {show(word)}")
        return ConfigError(
            f"unexpected argument {show(arg)} ({flag} takes its value after '=': {flag}={word})"
        )
    return ConfigError(f"unexpected argument {show(arg)}")


def with_constants(argv: Sequence[str]) -> tuple[list[str], list[int]]:
    """`argv` with each optional-value flag (`Action.OPTIONAL`) that does not take the word
    after it written ``--flag=CONST``, so that word stays the APP: ``--ws main:app`` is
    Granian's bare ``--ws``, ``--server-header main:app`` Uvicorn's switch. The places changed
    come second. A flag with `values` takes one of them; one without takes its value after '='
    only (``--server-header=NAME``)."""
    flags = optional_flags()
    result = list(argv)
    bare = []
    for index, arg in enumerate(result):
        if arg == "--":
            break
        setting = flags.get(arg)
        if setting is None:
            continue
        word = result[index + 1] if index + 1 < len(result) else "-"
        if word.lower() not in setting.values:
            result[index] = f"{arg}={setting.const}"
            bare.append(index)
    return result, bare


@cache
def optional_flags() -> dict[str, Setting]:
    """The flags whose value is optional, with their setting."""
    return {
        flag: setting
        for setting in SETTINGS
        if setting.action is Action.OPTIONAL
        for flag in setting.flags
    }


def format_help() -> str:
    """The ``--help`` text, which opens with `corral.config.helptext`'s words (imported here:
    a server parsing its command line does not keep them)."""
    from corral.config.helptext import help_description

    found = parser()
    found.description = help_description(__version__)  # examples, docs, the groups
    return found.format_help()


def forget() -> None:
    """Drop the parser and its tables, once the command line is parsed: a server's master
    would keep them (a few hundred argparse actions, about 0.2 MiB), and so would every worker
    forked from it. Asked again, they are made again."""
    import gc

    parser.cache_clear()
    hidden_flags.cache_clear()
    optional_flags.cache_clear()
    gc.collect()  # (the parser and its groups hold one another)


def declared_flags() -> list[str]:
    return [flag for setting in SETTINGS for flag in setting.all_flags]


def hidden(entry: peers.Name) -> str:
    return f"{entry.server}:{entry.name}"


# the other servers' tables, in the order a flag two of them share is taken from
PEER_TABLES = (gunicorn_names.NAMES.values(), uvicorn.FLAGS.values(), granian.FLAGS.values())


@cache
def hidden_flags() -> list[tuple[peers.Name, tuple[str, ...]]]:
    return peers.hidden_flags(PEER_TABLES, declared_flags())


def _add_hidden_flags(parser: argparse.ArgumentParser, flags: Iterable[Any]) -> None:
    """Gunicorn's flags corral does not declare, known to the parser, hidden from --help."""
    for entry, names in flags:
        common: dict[str, Any] = {
            "dest": hidden(entry),
            "default": argparse.SUPPRESS,
            "help": argparse.SUPPRESS,
        }
        if entry.value:
            action = "append" if entry.repeat else "store"
            parser.add_argument(*names, action=action, **common)
        else:
            parser.add_argument(*names, action="store_const", const=entry.constant, **common)


def _help(setting: Setting) -> str:
    text = setting.doc.replace("`", "")
    if default := setting.shown_default():
        text += f" [default:{_KEEP_TOGETHER}{default}]"
    return text.replace("%", "%%")


# A no-break space argparse does not wrap at (its whitespace is ASCII); printed as a space.
_KEEP_TOGETHER = "\u00a0"


class _HelpFormatter(argparse.HelpFormatter):
    """Gunicorn-like columns; a "[default: X]" is never split across two lines; a text's
    paragraphs are filled one by one, and those of indented lines (examples) kept as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=36)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return [line.replace(_KEEP_TOGETHER, " ") for line in super()._split_lines(text, width)]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            self._fill_paragraph(paragraph, width, indent) for paragraph in text.split("\n\n")
        )

    def _fill_paragraph(self, paragraph: str, width: int, indent: str) -> str:
        lines = paragraph.splitlines()
        if lines and lines[-1].startswith("  "):  # "examples:" and its lines
            return "\n".join(indent + line for line in lines)
        return super()._fill_text(paragraph, width, indent)


@cache
def parser() -> Parser:
    parser = Parser(
        prog="corral",
        usage="%(prog)s [OPTIONS] [APP]\n       %(prog)s ctl COMMAND ...",
        epilog=(
            "Every option except the command-line ones can also be set in the config file "
            "(-c FILE): the key is the long option without '--', with '-' written '_' "
            '(workers = 4, bind = [":8000"]); see docs/settings.md. A gunicorn.conf.py is '
            "read with Gunicorn's names, and Gunicorn's, Uvicorn's and Granian's other flags "
            "and GUNICORN_CMD_ARGS are known too."
        ),
        add_help=False,
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
    )
    parser.adding = True
    for title, blurb in SECTIONS:
        group = parser.add_argument_group(title, blurb)
        for setting in SETTINGS:
            if setting.section != title:
                continue
            if not setting.flags and setting.action is not Action.POSITIONAL:
                continue  # a file and document key only
            common: dict[str, Any] = {"default": argparse.SUPPRESS, "help": _help(setting)}
            if setting.action is Action.POSITIONAL:
                group.add_argument(setting.name, nargs="?", metavar=setting.metavar, **common)
            elif setting.action is Action.FLAG:
                group.add_argument(*setting.flags, dest=setting.name, action="store_true", **common)
            elif setting.action is Action.SWITCH:
                action = argparse.BooleanOptionalAction
                group.add_argument(*setting.flags, dest=setting.name, action=action, **common)
            elif setting.action is Action.OPTIONAL:
                group.add_argument(
                    *setting.flags,
                    dest=setting.name,
                    nargs="?",
                    const=setting.const,
                    metavar=setting.metavar if setting.values else f"={setting.metavar}",
                    **common,
                )
            else:
                group.add_argument(
                    *setting.flags,
                    dest=setting.name,
                    action="append" if setting.action is Action.APPEND else "store",
                    metavar=setting.metavar,
                    **common,
                )
    _add_hidden_flags(parser, hidden_flags())
    parser.adding = False
    return parser

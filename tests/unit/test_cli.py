"""corral.cli.main: what the command prints and its exit codes (in-process and as a subprocess)."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from corral import cli, core
from corral.config import Document, parse_command_line
from corral.config.helptext import DOCS, EXAMPLES
from corral.config.settings import SECTIONS
from tests.unit.test_config import GUNICORN_TRUST


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env} if env else None,
    )


# -- as a real process -----------------------------------------------------------------------------


def test_version() -> None:
    result = run("--version")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"corral 0.1.0 ({core.NAME})\n",
        "",
    )
    result = run("--version", env={"CORRAL_NO_EXTENSIONS": "1"})
    assert result.stdout == "corral 0.1.0 (Python core: CORRAL_NO_EXTENSIONS=1)\n"


def test_check_config_prints_the_document() -> None:
    result = run("myproj.wsgi:application", "-w", "3", "-b", ":0", "--check-config")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["listeners"] == {
        "0.0.0.0:0": {"pass": "applications/myproj.wsgi", "forwarded": GUNICORN_TRUST}
    }
    app = doc["applications"]["myproj.wsgi"]
    assert (app["module"], app["callable"], app["processes"]) == ("myproj.wsgi", "application", 3)
    assert doc["settings"]["log_level"] == "info"


def test_check_config_with_a_file(tmp_path: Path) -> None:
    path = tmp_path / "corral.toml"
    path.write_text('app = "site:app"\nworkers = 2\n')
    result = run("-c", str(path), "--check-config")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["applications"]["site"]["processes"] == 2


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("app", "-w", "two"), 'corral: error: --workers: expected int >= 1 or "auto", got "two"'),
        (("app", "--nope"), "corral: error: --nope: unknown option"),
        ((), "corral: error: missing APP"),
        (("app", "--check-config", "-b", "[::1"), "corral: error: --bind: expected HOST:PORT"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(args: tuple[str, ...], line: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(line)
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")


def test_bad_file_value_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('app = "a"\nworkers = "two"\n')
    result = run("-c", str(path))
    assert result.returncode == 2
    assert result.stderr == (
        f'corral: error: {path}: $.workers: expected int >= 1 or "auto", got "two"\n'
    )


def test_help_is_grouped_and_shows_defaults() -> None:
    result = run("--help")
    assert result.returncode == 0 and result.stderr == ""
    out = result.stdout
    # APP is optional (a config file, the control API or an emperor's directory may say what
    # runs), and the control client is named
    assert out.startswith("usage: corral [OPTIONS] [APP]\n       corral ctl COMMAND ...\n")
    assert "`corral ctl` reads and changes a running server" in " ".join(out.split())
    for section in ("Application:", "Listening:", "Timeouts:", "Request limits:", "Logging:"):
        assert section in out
    assert "[default: 127.0.0.1:8000]" in out
    assert "[default: unix:STATE_DIR/control.sock]" in out
    assert not [line for line in out.splitlines() if line.rstrip().endswith("[default:")]
    assert "\u00a0" not in out  # the no-break space that keeps a default together is not shown
    assert "--limit-request-field_size" in out


@pytest.mark.parametrize(("example", "what"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_every_help_example_is_a_command_line_corral_takes(example: str, what: str) -> None:
    """As the command parses it first (the files it names are not read here)."""
    argv = shlex.split(example)
    assert argv[0] == "corral"
    assert parse_command_line(argv[1:], environ={}) is not None


def test_help_wraps_paragraphs_but_keeps_the_example_lines() -> None:
    """Robust to any new flag or section: the examples stay whole at any width, and the group
    list is the sections'."""
    for columns in ("60", "200"):
        out = run("--help", env={"COLUMNS": columns}).stdout
        for command, what in EXAMPLES:
            assert any(
                line.startswith(f"  {command} ") and line.endswith(what)
                for line in out.splitlines()
            ), (command, out[:1500])
    listed = " ".join(out.split("The options, in groups: ", 1)[1].split("\n\n")[0].split())
    assert listed == ", ".join(title for title, _ in SECTIONS) + "."


# -- in process --------------------------------------------------------------------------------


def test_main_serves_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    from corral.master import startup
    from corral.master.generation import Origin

    served: list[tuple[Document, Origin]] = []

    def serve(
        doc: Document,
        origin: Origin,
        control: object = None,
        started: object = None,
        emperor: object = None,
        fd: object = None,
    ) -> int:
        assert control is None  # the control API is off unless asked for
        assert started is None  # no daemon waits for it
        assert emperor is None  # no vassal directory
        assert fd is None  # no --fd
        served.append((doc, origin))
        return 7

    monkeypatch.setattr(startup, "serve", serve)
    assert cli.main(["pkg:app", "-w", "2"]) == 7
    doc, origin = served[0]
    assert doc.applications["pkg"].workers == 2
    # what reload and USR2 redo: the same command line gives the same document
    assert origin.argv == ["pkg:app", "-w", "2"]
    assert origin.reread() == doc


def test_main_reports_errors_without_serving(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pkg:app", "--threads", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == 'corral: error: --threads: expected int >= 1, got "0"\n'


def test_help_and_version_win_over_a_missing_app(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert cli.main(["-h"]) == 0
    assert "usage: corral" in capsys.readouterr().out


def test_a_config_warning_is_one_line_and_the_command_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "site.ini"
    path.write_text("[uwsgi]\nmodule = site\nstats = :9191\nmaster = true\n")
    result = run("--ini", str(path), "--check-config")
    assert result.returncode == 0
    assert result.stderr == (
        f"corral: warning: {path}:3: stats: not supported: the control API's /status and "
        "/metrics (--control unix:PATH)\n"
    )
    assert json.loads(result.stdout)["applications"]["site"]["module"] == "site"


def test_help_names_every_page_of_the_documentation() -> None:
    """Each page of docs/ (what setup.py installs) is in the help's list, and only those."""
    pages = Path(__file__).resolve().parents[2] / "docs"
    assert sorted(name for name, _ in DOCS) == sorted(page.name for page in pages.glob("*.md"))

"""The words ``corral --help`` opens with: what corral serves, examples to start from, where
the documentation is, and the groups the options come in.

The options themselves are the settings' declarations (`corral.config.sources` builds the
parser, one group per section of `SECTIONS`): nothing here names a flag but the examples, so a
new flag needs nothing here and a new section is listed by itself. Each example is a command
line tests/unit/test_cli.py parses as the command does, so none can go stale.
"""

from __future__ import annotations

import os
import site
import sys

from corral.config.settings import SECTIONS

__all__ = ["DOCS", "EXAMPLES", "docs_directory", "help_description"]

# (command line, what it does), as a newcomer would type them first
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("corral myproject.wsgi -w 4 -b 0.0.0.0:8000", "Django: 4 processes, port 8000"),
    ("corral app:app -w 2 --threads 8", "Flask: 2 processes of 8 threads"),
    ("corral main:app", "FastAPI: ASGI is found by itself"),
    ("corral main:app --host 0.0.0.0 --port 8000", "Uvicorn's (and Granian's) flags work"),
    ("corral myproject.wsgi", "reads ./gunicorn.conf.py if there"),
    ("corral --ini uwsgi.ini", "a uWSGI ini file"),
    ("corral mysite.wsgi --static /static=./staticfiles", "Django's collected static files"),
    ("corral -c unit.json", "an NGINX Unit document"),
    ("corral -c corral.toml --check-config", "validate and print a config file"),
    ("corral --state-dir /var/lib/corral", "set up through the control API"),
)

# docs/ in the source tree, installed with the package (setup.py's data_files): (file, what
# it holds)
DOCS: tuple[tuple[str, str], ...] = (
    (
        "settings.md",
        "every setting, and Gunicorn's, Uvicorn's, Granian's, uWSGI's and NGINX "
        "Unit's names for it",
    ),
    ("migrating.md", "coming from Gunicorn, uWSGI, NGINX Unit, Uvicorn, Granian or nginx"),
    ("static.md", "static files: --static, uWSGI's and Granian's, a document's shares"),
    ("tls.md", "HTTPS: --certfile and --keyfile, the peers' TLS flags, renewal on HUP"),
    ("limits.md", "requests per client across the workers: --limit-rate, as nginx's limit_req"),
    ("proxy.md", "NGINX Unit's proxy action and upstreams: other HTTP servers behind a route"),
    ("operations.md", "signals, reloads, logs and exit codes"),
    ("deploy.md", "systemd units and nginx in front"),
    ("polyglot.md", "other languages: any command as an external application, php"),
    ("control-api.md", "the control API and corral ctl"),
    ("architecture.md", "how corral works inside, module by module"),
)
# where setup.py's data_files put the pages, under the installation's prefix
INSTALLED_DOCS = os.path.join("share", "doc", "corral")
# the source tree's pages, for corral run from a checkout (src/corral/config/helptext.py)
SOURCE_DOCS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "docs")


def docs_directory() -> str | None:
    """The directory the documentation was installed to (under ``sys.prefix``, or the user
    base for ``pip install --user``), else the source tree's docs/; None when neither is
    there (an installation that left the pages out)."""
    for prefix in (sys.prefix, site.getuserbase()):
        installed = os.path.join(prefix, INSTALLED_DOCS)
        if os.path.isfile(os.path.join(installed, DOCS[0][0])):
            return installed
    source = os.path.normpath(SOURCE_DOCS)
    return source if os.path.isfile(os.path.join(source, DOCS[0][0])) else None


def help_description(version: str) -> str:
    """The text between the usage lines and the first group of options: paragraphs, the
    examples' lines kept as they are (`parser._HelpFormatter` fills only the others)."""
    width = max(len(command) for command, _ in EXAMPLES) + 2
    examples = "\n".join(f"  {command:<{width}}{what}" for command, what in EXAMPLES)
    docs = ", ".join(f"{name} ({what})" for name, what in DOCS)
    groups = ", ".join(title for title, _ in SECTIONS)
    return "\n\n".join(
        (
            f"corral {version}: serve a WSGI or ASGI application (APP, module:callable), "
            "or the applications of a config file (-c), of the control API (--state-dir, "
            "--control) or of a directory (--emperor). `corral ctl` reads and changes a "
            "running server through its control API (corral ctl --help).",
            f"examples:\n{examples}",
            f"The documentation is {_where(docs_directory())}: {docs}.",
            f"The options, in groups: {groups}.",
        )
    )


def _where(directory: str | None) -> str:
    if directory is None:
        return "the docs/ directory of corral's source tree (an installed wheel puts it in " + (
            f"{os.path.join('PREFIX', INSTALLED_DOCS)})"
        )
    return f"in {directory}"

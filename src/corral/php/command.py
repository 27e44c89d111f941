"""php-fpm as the master's supervision runs it: the ``"php"`` kind's command
(`corral.external.kinds.KINDS`).

The supervision (``corral/external/``) gives the pool one place, a unix socket path in a
directory of its own; this writes php-fpm's configuration (`corral.php.fpm.fpm_pool`, listening
there) beside the socket and returns the command that reads it. php-fpm's own master runs as
corral does (root when corral is), so that it can give its children the application's
``user`` and ``group``, which therefore go into the pool's configuration, not into the
`Command`; it is one process whose children are the application's ``processes``.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from corral.external.command import Command, Place
from corral.php.fpm import fpm_pool

__all__ = ["php_fpm_command"]


def php_fpm_command(name: str, app: Any, place: Place) -> Command:
    """The php-fpm of the php application ``name`` (the document's ``app``) listening at
    ``place``; its configuration is written now (ValueError: a value php-fpm cannot take,
    naming its JSON path; OSError: the file cannot be written)."""
    assert place.path is not None  # the kind's places are unix sockets
    pool = fpm_pool(name, app, listen=place.path)
    # php-fpm's master (corral's user) makes the socket, whose own mode and owner say who may
    # connect (fpm.py): the directory lets anyone through, as a socket in /tmp would
    os.chmod(os.path.dirname(place.path), 0o711)
    descriptor = os.open(pool.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as config:
        config.write(pool.config)
    # php-fpm's children outlive a master killed outright: should corral's master die, php-fpm
    # gets SIGTERM, on which it ends them and exits
    return Command(
        argv=pool.command, stdout=app.stdout, stderr=app.stderr, death_signal=signal.SIGTERM
    )

"""The user and group the workers run as, resolved once by the master."""

from __future__ import annotations

import os


class Identity:
    """The user and group workers switch to, resolved once by the master."""

    def __init__(self, user: str | None, group: str | None) -> None:
        """Look the names up now; raises ValueError with a one-line message."""
        import grp
        import pwd

        self.uid: int | None = None
        self.gid: int | None = None
        self.name: str | None = None
        if group:
            try:
                self.gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
            except KeyError:
                raise ValueError(f"--group {group}: no such group") from None
        if user:
            try:
                entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
            except KeyError:
                raise ValueError(f"--user {user}: no such user") from None
            self.uid, self.name = entry.pw_uid, entry.pw_name
            if self.gid is None:
                self.gid = entry.pw_gid

    def switch(self) -> None:
        """In a worker, before it imports the application. Raises OSError."""
        if self.gid is not None:
            os.setgid(self.gid)
        if self.uid is not None:
            os.initgroups(self.name, self.gid)  # type: ignore[arg-type]
            os.setuid(self.uid)

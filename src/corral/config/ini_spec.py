"""Whether a config file argument names a uWSGI ini file, and which section: ``FILE.ini`` or
``FILE.ini:SECTION``. Apart from `corral.config.uwsgi`, which reads the file, so that a
command line or a TOML file decides it without importing uWSGI's reader (the master, and so
every worker forked from it, would keep it in memory).
"""

import os

__all__ = ["DEFAULT_SECTION", "is_ini", "split_spec"]

DEFAULT_SECTION = "uwsgi"


def is_ini(spec: str) -> bool:
    """Whether a config file argument names an ini file (``FILE.ini`` or ``FILE.ini:SECTION``)."""
    return split_spec(spec)[0].lower().endswith(".ini")


def split_spec(spec: str) -> tuple[str, str]:
    """``FILE[:SECTION]`` -> (file, section); a path that exists as given is all file."""
    if os.path.exists(spec) or ":" not in spec:
        return spec, DEFAULT_SECTION
    path, _, section = spec.rpartition(":")
    if "/" in section:
        return spec, DEFAULT_SECTION
    return path, section or DEFAULT_SECTION

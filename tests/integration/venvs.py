"""Virtualenvs for the `home` tests, made with Debian's /usr/bin/python3.11.

Each holds its own version of `corral_demo_pkg`, a package written here with its
``.dist-info`` straight into site-packages (no network, no build backend: the same files pip
would install, minus the build). Used by test_venv.py and test_privileges.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BASE_PYTHON = "/usr/bin/python3.11"
DEMO = "corral_demo_pkg"


def has_base_python() -> bool:
    return os.access(BASE_PYTHON, os.X_OK)


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def make_venv(venv: Path) -> Path:
    """A real virtualenv (without pip: nothing is installed with it) at ``venv``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    subprocess.run(
        [BASE_PYTHON, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        env=env,
        timeout=120,
        capture_output=True,
    )
    assert site_packages(venv).is_dir(), list(venv.rglob("site-packages"))
    return venv


def install_module(venv: Path, name: str, version: str, source: str | None = None) -> Path:
    """Package ``name`` at ``version`` into the virtualenv, as pip lays it out."""
    site = site_packages(venv)
    package = site / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        source if source is not None else f'__version__ = "{version}"\n'
    )
    dist_info = site / f"{name}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    (dist_info / "INSTALLER").write_text("corral-tests\n")
    (dist_info / "RECORD").write_text(
        f"{name}/__init__.py,,\n{dist_info.name}/METADATA,,\n{dist_info.name}/RECORD,,\n"
    )
    return package


def make_demo_venv(venv: Path, version: str) -> Path:
    """A virtualenv holding `corral_demo_pkg` ``version``."""
    make_venv(venv)
    install_module(venv, DEMO, version)
    return venv


def readable(path: Path) -> None:
    """Every directory under ``path`` (included) 0755 and every file 0644: for an
    unprivileged worker."""
    path.chmod(0o755)
    for entry in path.rglob("*"):
        if entry.is_symlink():
            continue
        entry.chmod(0o755 if entry.is_dir() else 0o644)

"""Virtualenvs made with Debian's /usr/bin/python3.11, for the `home` tests and the sandbox.

Each demo virtualenv holds its own version of `corral_demo_pkg`, a package written here with its
``.dist-info`` straight into site-packages (no network, no build backend: the same files pip
would install, minus the build). Used by test_venv.py and test_privileges.py.

`make_sandbox`: a world-readable directory under /tmp with a virtualenv that has corral
installed (not editable) and a directory for the applications, for servers whose workers drop
privileges (the default interpreter lives under /root, which they cannot read). conftest.py
makes one per session (the `sandbox` fixture), for test_privileges.py and test_nginx_uwsgi.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BASE_PYTHON = "/usr/bin/python3.11"
DEMO = "corral_demo_pkg"
REPO = Path(__file__).resolve().parents[2]


def has_base_python() -> bool:
    return os.access(BASE_PYTHON, os.X_OK)


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def make_venv(venv: Path, base: str = BASE_PYTHON) -> Path:
    """A real virtualenv of ``base`` (without pip: nothing is installed with it) at ``venv``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    subprocess.run(
        [base, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        env=env,
        timeout=120,
        capture_output=True,
    )
    assert list(venv.glob("lib/python3*/site-packages")), list(venv.rglob("site-packages"))
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


def readable_dir(path: Path) -> Path:
    """``path`` made (if missing) and set to 0755."""
    path.mkdir(exist_ok=True)
    path.chmod(0o755)
    return path


@dataclass
class Sandbox:
    root: Path  # 0755, under /tmp
    python: str  # the virtualenv's interpreter, with corral installed in it
    site: Path  # where corral is installed
    apps: Path  # 0755, holds a copy of priv_app.py; PYTHONPATH and cwd of the servers

    def add_app(self, source: Path) -> Path:
        """A world-readable copy of an application module in `apps`."""
        copy = self.apps / source.name
        shutil.copy(source, copy)
        copy.chmod(0o644)
        return copy


def make_sandbox(
    root: Path, apps: list[Path], base: str = BASE_PYTHON, compiled: bool = True
) -> Sandbox:
    """A virtualenv of ``base`` under ``root`` (0755) with this checkout's corral installed
    (its compiled core built unless ``compiled`` is False), and ``apps`` copied next to it."""
    root.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if not compiled:
        env["CORRAL_NO_EXTENSIONS"] = "1"
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, env=env, timeout=120)
    # Install from a copy: an in-tree build would leave build/ in the shared checkout.
    source = root / "source"
    shutil.copytree(
        REPO / "src" / "corral",
        source / "src" / "corral",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    python = str(venv / "bin" / "python")
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"
    site = Path(
        subprocess.run(
            [python, "-c", "import corral, os; print(os.path.dirname(corral.__file__))"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=root,
        ).stdout.strip()
    )
    assert site.is_relative_to(venv), site
    sandbox = Sandbox(root=root, python=python, site=site, apps=readable_dir(root / "apps"))
    for app in apps:
        sandbox.add_app(app)
    return sandbox

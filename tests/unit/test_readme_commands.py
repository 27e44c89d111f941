"""README.md's second command is what CI runs (.ci/run's last line), and it installs the Debian
packages the integration tests look for."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return [line for block in blocks[:2] for line in block.splitlines() if not line.startswith("#")]


def test_ci_runs_the_readme_test_command_exactly() -> None:
    test_command = _readme_commands()[1]
    assert "pytest" in test_command
    assert (ROOT / ".ci" / "run").read_text().rstrip().splitlines()[-1] == test_command


def test_the_test_command_installs_the_system_packages_first() -> None:
    test_command = _readme_commands()[1]
    assert test_command.startswith("bash tests/system-packages.sh && ")
    script = (ROOT / "tests" / "system-packages.sh").read_text()
    for package in ("nginx-light", "haproxy", "php-fpm", "starman", "puma", "jetty9"):
        assert f"missing+=({package})" in script

"""docs/deploy.md's Kubernetes manifests are valid objects of Kubernetes' API (its published
schemas, through kubernetes-validate, strict: an unknown field fails), and the corral command
lines in them are valid corral command lines that say what the page says they do."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from corral.config.sources import load

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
KUBERNETES = "1.31"  # a version with the kubelet's preStop sleep action (1.30+)


def _manifests() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    return [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]


def _commands() -> list[list[str]]:
    found = []
    for manifest in _manifests():
        if manifest["kind"] != "Deployment":
            continue
        for container in manifest["spec"]["template"]["spec"]["containers"]:
            if container.get("args", [""])[0] == "corral":
                found.append(container["args"][1:])
    return found


def test_the_page_has_a_deployment_a_service_and_a_disruption_budget() -> None:
    kinds = [manifest["kind"] for manifest in _manifests()]
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(kinds)


@pytest.mark.parametrize("manifest", _manifests(), ids=lambda m: m["kind"])
def test_each_manifest_is_a_valid_kubernetes_object(manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def test_its_corral_command_lines_are_valid_and_probe_and_delay() -> None:
    commands = _commands()
    assert commands
    for argv in commands:
        settings = load(argv).settings
        assert settings.health is True
    first = load(commands[0]).settings
    assert (first.shutdown_delay, first.graceful_timeout) == (10.0, 30.0)
    grace = _manifests()[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > first.shutdown_delay + first.graceful_timeout

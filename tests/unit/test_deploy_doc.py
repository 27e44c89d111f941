"""docs/deploy.md's Kubernetes manifests are valid objects of Kubernetes' API (its published
schemas, through kubernetes-validate, strict: an unknown field fails), and the corral command
lines in them and in its container recipe are valid corral command lines that say what the
page says they do (a ConfigMap's file read where the Deployment mounts it)."""

from __future__ import annotations

import json
import re
import shlex
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


def _commands(mounted: Path) -> list[list[str]]:
    """Each Deployment's corral arguments, the paths under a ConfigMap's mount moved to where
    its files are written under ``mounted``."""
    maps = {m["metadata"]["name"]: m["data"] for m in _manifests() if m["kind"] == "ConfigMap"}
    found = []
    for manifest in _manifests():
        if manifest["kind"] != "Deployment":
            continue
        pod = manifest["spec"]["template"]["spec"]
        config_maps = {
            volume["name"]: volume["configMap"]["name"]
            for volume in pod.get("volumes", [])
            if "configMap" in volume
        }
        for container in pod["containers"]:
            args = container.get("args", [""])
            if args[0] != "corral":
                continue
            for mount in container.get("volumeMounts", []):
                directory = mounted / mount["name"]
                directory.mkdir(parents=True, exist_ok=True)
                for name, text in maps[config_maps[mount["name"]]].items():
                    (directory / name).write_text(text)
                args = [arg.replace(mount["mountPath"], str(directory)) for arg in args]
            found.append(args[1:])
    return found


def _container_recipe() -> dict[str, list[str]]:
    """The recipe's instructions of the stage that runs, by name (a line each)."""
    (block,) = re.findall(r"```dockerfile\n(.*?)```", DOC.read_text(), re.S)
    lines = block.replace("\\\n", " ").splitlines()
    last_stage = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    found: dict[str, list[str]] = {}
    for line in lines[last_stage:]:
        if line.strip():
            instruction, _, rest = line.partition(" ")
            found.setdefault(instruction, []).append(rest)
    return found


def test_the_page_has_a_deployment_a_service_and_a_disruption_budget() -> None:
    kinds = [manifest["kind"] for manifest in _manifests()]
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(kinds)


@pytest.mark.parametrize("manifest", _manifests(), ids=lambda m: m["kind"])
def test_each_manifest_is_a_valid_kubernetes_object(manifest: dict[str, Any]) -> None:
    kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def test_its_corral_command_lines_are_valid_and_probe_and_delay(tmp_path: Path) -> None:
    commands = _commands(tmp_path)
    assert len(commands) == 3
    for argv in commands:
        settings = load(argv).settings
        assert settings.health is True
    first = load(commands[0]).settings
    assert (first.shutdown_delay, first.graceful_timeout) == (10.0, 30.0)
    grace = _manifests()[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > first.shutdown_delay + first.graceful_timeout
    # the one that watches its ConfigMap's file has the same delays from that file
    watched = load(commands[2]).settings
    assert watched.watch_config is True
    assert (watched.shutdown_delay, watched.graceful_timeout) == (10.0, 30.0)


def test_the_container_recipe_runs_corral_itself_as_a_user_and_probes_liveness() -> None:
    recipe = _container_recipe()
    # exec form: corral is the first process, and SIGTERM reaches it rather than a shell
    (command,) = recipe["CMD"]
    argv = json.loads(command)
    assert argv[0] == "corral"
    doc = load(argv[1:])
    settings = doc.settings
    assert settings.health is True and settings.shutdown_delay == 10.0
    assert list(doc.listeners) == ["0.0.0.0:8000"]
    assert recipe["EXPOSE"] == ["8000"] and recipe["STOPSIGNAL"] == ["SIGTERM"]
    assert recipe["USER"] != ["root"] and recipe["USER"] != ["0"]
    (check,) = recipe["HEALTHCHECK"]
    probe = json.loads(check[check.index("CMD ") + 4 :])
    assert settings.liveness_path in probe[-1]
    assert shlex.split(recipe["ENV"][0])[0] == "PATH=/venv/bin:$PATH"

"""`home` (`--home`, `--virtualenv`, `-H`): each application imported from its own virtualenv.

Two real virtualenvs made with Debian's /usr/bin/python3.11 (the same minor version as the
interpreter running corral here, a pyenv 3.11) hold two versions of `corral_demo_pkg`; corral
serves `venv_app`, which reports the version it imported and what the worker's interpreter
says about its prefix, its path and its environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
import uvloop

from tests.integration.control import Control, listening_port, short_dir
from tests.integration.server import APPS, Server, http_json, run_cli, wait_for
from tests.integration.venvs import (
    has_base_python,
    install_module,
    make_demo_venv,
    site_packages,
)

SRC = Path(__file__).resolve().parents[2] / "src"
OWN_SITE = Path(site.getsitepackages()[0])

pytestmark = pytest.mark.skipif(
    not has_base_python(), reason="needs /usr/bin/python3.11 to make the virtualenvs"
)


@dataclass
class Venvs:
    root: Path
    one: Path  # corral_demo_pkg 1.0, a .pth file, copies of iniconfig, msgspec and uvloop
    two: Path  # corral_demo_pkg 2.0
    extra: Path  # the directory one's .pth file names
    old: Path  # a pyvenv.cfg of Python 3.9
    plain: Path  # a directory that is no virtualenv


@pytest.fixture(scope="module")
def venvs(tmp_path_factory) -> Venvs:
    root = tmp_path_factory.mktemp("venvs")
    one = make_demo_venv(root / "one", "1.0")
    two = make_demo_venv(root / "two", "2.0")
    extra = root / "extra"
    extra.mkdir()
    (extra / "corral_demo_extra.py").write_text("")
    (site_packages(one) / "corral-demo.pth").write_text(
        f"{extra}\nimport os; os.environ['CORRAL_DEMO_PTH'] = 'ran'\n"
    )
    # iniconfig is in the test interpreter's site-packages (pytest needs it) and no corral
    # process imports it: the virtualenv's copy must win. msgspec and uvloop are corral's
    # own, imported before the application: they must stay corral's (uvloop's copy here
    # would break the worker's loop).
    install_module(one, "iniconfig", "99")
    install_module(one, "msgspec", "99", source="raise ImportError('the venv copy')\n")
    install_module(one, "uvloop", "99", source="new_event_loop = None\n")
    old = root / "old"
    (site_packages(old).parent.parent / "python3.9" / "site-packages").mkdir(parents=True)
    (old / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.9.1\n")
    plain = root / "plain"
    plain.mkdir()
    return Venvs(root, one, two, extra, old, plain)


@dataclass
class Address:
    host: str
    port: int


def run_venv_app(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("venv_app", "-b", "127.0.0.1:0", *args, timeout=30.0)


def assert_served_from(report: dict, venv: Path, version: str) -> None:
    assert report["version"] == version
    assert report["dist_version"] == version  # importlib.metadata sees the same site-packages
    assert Path(report["demo_file"]).parent.parent == site_packages(venv)
    assert report["prefix"] == report["exec_prefix"] == str(venv)
    assert report["virtual_env"] == str(venv)
    assert report["executable"] == str(venv / "bin" / "python")
    assert report["path_head"] == str(venv / "bin")
    assert report["base_prefix"] == sys.base_prefix  # the interpreter is corral's


def test_each_application_runs_its_own_virtualenv(venvs):
    with (
        Server("venv_app", "--home", str(venvs.one), workers=2) as one,
        Server("venv_app", "--virtualenv", str(venvs.two)) as two,
        Server("venv_app", "-H", str(venvs.two), "--threads", "4") as threaded,
    ):
        assert_served_from(http_json(one), venvs.one, "1.0")
        assert_served_from(http_json(two), venvs.two, "2.0")
        assert_served_from(http_json(threaded), venvs.two, "2.0")
        assert "Traceback" not in one.stderr + two.stderr + threaded.stderr
        assert one.stop() == two.stop() == threaded.stop() == 0


def test_site_packages_order_pth_files_and_corrals_own_modules(venvs):
    own_iniconfig = importlib.util.find_spec("iniconfig")
    assert own_iniconfig is not None and Path(own_iniconfig.origin).is_relative_to(OWN_SITE)
    with Server("venv_app", "--home", str(venvs.one)) as server:
        report = http_json(server)
        assert server.stop() == 0
    venv_site = site_packages(venvs.one)
    path = report["sys_path"]
    # the virtualenv's site-packages, then what its .pth file adds, then corral's own
    at = path.index(str(venv_site))
    assert path[at + 1] == str(venvs.extra)
    assert at + 1 < path.index(str(OWN_SITE))
    assert path.index(str(APPS)) < at  # PYTHONPATH and the standard library come first
    assert path.index(os.path.dirname(os.__file__)) < at
    assert report["extra_file"] == str(venvs.extra / "corral_demo_extra.py")
    assert report["pth_ran"] == "ran"  # the .pth file's import line ran
    assert report["iniconfig_file"] == str(venv_site / "iniconfig" / "__init__.py")
    # imported before the virtualenv was: corral's copies stay (the documented limit)
    assert report["msgspec_file"] == msgspec.__file__
    assert report["uvloop_file"] == uvloop.__file__


def test_a_relative_home_is_taken_from_the_start_directory_not_chdir(venvs):
    with Server("venv_app", "--home", "two", "--chdir", str(APPS), cwd=str(venvs.root)) as server:
        assert_served_from(http_json(server), venvs.two, "2.0")
        assert server.stop() == 0


def test_a_virtualenv_of_another_python_fails_to_load_with_one_line(venvs):
    result = run_venv_app("--home", str(venvs.old), "-w", "2")
    err = result.stderr
    assert result.returncode == 3, err
    cause = (
        f"home {venvs.old}: the virtualenv is for Python 3.9, corral runs Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}; recreate it with python"
    )
    lines = [line for line in err.splitlines() if cause in line]
    assert len(lines) == 1, err
    assert f"[CRITICAL] application venv_app failed to load: {cause}" in lines[0], err
    assert lines[0].endswith("; shutting down"), err
    assert "Traceback" not in err
    assert "respawning" not in err
    assert err.count(" spawned (pid ") <= 1, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--home", "{plain}"), '--home: "{plain}" is not a virtualenv (it has no pyvenv.cfg)'),
        (("-H", "{root}/none"), '--home: "{root}/none" is not a virtualenv (no such directory)'),
        (
            ("--home", "{two}", "--preload"),
            "$.applications.venv_app.home: home cannot be combined with preload: the master "
            "would import the application outside its virtualenv; drop preload",
        ),
    ],
    ids=["no-pyvenv-cfg", "missing", "with-preload"],
)
def test_a_home_that_cannot_be_used_is_a_config_error(venvs, args, message):
    paths = {"plain": venvs.plain, "root": venvs.root, "two": venvs.two}
    result = run_venv_app(*(arg.format(**paths) for arg in args))
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"corral: error: {message.format(**paths)}\n"


def test_the_control_api_moves_an_application_to_another_virtualenv(venvs):
    with (
        short_dir() as directory,
        Server("venv_app", "--home", str(venvs.one), f"--control=unix:{directory}/c.sock") as s,
    ):
        control = Control.of(s)
        assert http_json(s)["version"] == "1.0"
        home = "/config/applications/venv_app/home"
        answer = control.put(home, str(venvs.old))
        assert answer.status == 500, answer.json
        assert answer.json["detail"].endswith(
            f"before it was ready: home {venvs.old}: the virtualenv is for Python 3.9, corral "
            f"runs Python {sys.version_info[0]}.{sys.version_info[1]}; recreate it with "
            f"python{sys.version_info[0]}.{sys.version_info[1]} -m venv"
        ), answer.json
        assert http_json(s)["version"] == "1.0"  # the old generation serves on
        answer = control.put(home, "two")  # no start directory here: the path must be absolute
        assert answer.status == 400, answer.json
        assert "home: expected absolute path or null" in answer.json["detail"], answer.json
        assert control.put(home, str(venvs.two)).status == 200
        # the master imported nothing from the first virtualenv: the new workers see only two
        wait_for(lambda: http_json(s)["version"] == "2.0", timeout=10)
        assert_served_from(http_json(s), venvs.two, "2.0")
        # without a virtualenv, the package is nowhere: the change is rolled back
        answer = control.delete(home)
        assert answer.status == 500, answer.json
        assert "ModuleNotFoundError: No module named 'corral_demo_pkg'" in answer.json["detail"]
        assert_served_from(http_json(s), venvs.two, "2.0")
        assert s.stop() == 0


def test_activation_under_debians_own_interpreter(venvs):
    """Debian's system Python (not in a virtualenv) names its own site directories
    dist-packages, and `site.getsitepackages` would say dist-packages for the virtualenv too:
    `activate` uses the virtualenv's layout instead."""
    script = (
        "import json, sys\n"
        "from corral.apps.venv import activate\n"
        "activate(sys.argv[1])\n"
        "import corral_demo_pkg\n"
        "print(json.dumps({'version': corral_demo_pkg.__version__, 'path': sys.path}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(SRC)
    result = subprocess.run(
        ["/usr/bin/python3.11", "-c", script, str(venvs.two)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["version"] == "2.0"
    path = report["path"]
    debian_site = [p for p in path if p.endswith("dist-packages")]
    assert debian_site, path  # the interpreter's own, ahead of which the virtualenv goes
    assert path.index(str(site_packages(venvs.two))) < path.index(debian_site[0])


def test_two_applications_of_one_server_each_in_its_virtualenv(venvs):
    """Two pools of one master, each importing its application from its own virtualenv
    (different versions of one package), side by side on their own listeners."""
    with (
        short_dir() as directory,
        Server("venv_app", "--home", str(venvs.one), f"--control=unix:{directory}/c.sock") as s,
    ):
        control = Control.of(s)
        doc = control.get("/config").json
        doc["applications"]["second"] = {
            **doc["applications"]["venv_app"],
            "home": str(venvs.two),
            "working_directory": str(APPS),
        }
        doc["listeners"]["127.0.0.2:0"] = {"pass": "applications/second"}
        answer = control.put("/config", doc)
        assert answer.status == 200, answer.json
        second = Address("127.0.0.2", listening_port(s, "127.0.0.2:0"))
        assert_served_from(http_json(s), venvs.one, "1.0")
        assert_served_from(http_json(second), venvs.two, "2.0")
        assert s.stop() == 0

"""Reports which virtualenv it was imported from: served with `--home` by test_venv.py."""

import importlib.metadata
import json
import os
import sys

import corral_demo_pkg
import msgspec

IMPORTED = {
    "version": corral_demo_pkg.__version__,
    "dist_version": importlib.metadata.version("corral_demo_pkg"),
    "demo_file": corral_demo_pkg.__file__,
    "prefix": sys.prefix,
    "exec_prefix": sys.exec_prefix,
    "base_prefix": sys.base_prefix,
    "executable": sys.executable,
    "virtual_env": os.environ.get("VIRTUAL_ENV"),
    "path_head": os.environ.get("PATH", "").split(os.pathsep)[0],
    "msgspec_file": msgspec.__file__,
    "pth_ran": os.environ.get("CORRAL_DEMO_PTH"),
    "sys_path": sys.path,
}


def _optional(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    return module.__file__


def application(environ, start_response):
    body = json.dumps(
        {
            **IMPORTED,
            "pid": os.getpid(),
            "extra_file": _optional("corral_demo_extra"),
            "iniconfig_file": _optional("iniconfig"),
            "uvloop_file": _optional("uvloop"),
        }
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]

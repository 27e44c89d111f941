"""Builds corral's compiled core (Cython); everything else is in pyproject.toml.

``CORRAL_NO_EXTENSIONS=1`` builds the pure-Python core only. Without a C compiler or the
Python headers the build stops with one line saying what to install, or how to ask for the
pure-Python build, instead of a compiler's error.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# written in Cython
MODULES = ["corral.http._parser"]
# Python modules compiled as they are (Cython's pure-Python mode), typed by the .pxd beside
# each; the .py stays the Python core (corral/core.py chooses at run time)
TWINS = [
    "corral.http.head",
    "corral.http.response",
    "corral.http.chunked",
    "corral.server.exchange",
    "corral.server.bodyclock",
    "corral.server.connection",
    "corral.server.routed",
    "corral.server.acceptor",
    "corral.server.tlstransport",
    "corral.apps.wsgi.environ",
    "corral.apps.wsgi.response",
    "corral.apps.wsgi.runner",
    "corral.apps.asgi.scope",
    "corral.apps.asgi.body",
    "corral.apps.asgi.runner",
    "corral.apps.asgi.adapter",
    "corral.filters.forwarded",
    "corral.filters.ratelimit",
    "corral.filters.connlimit",
    "corral.filters.gate",
    "corral.static.answer",
    "corral.static.files",
    "corral.actions.share",
    "corral.actions.application",
    "corral.actions.external",
    "corral.actions.fastcgi",
    "corral.actions.proxy",
    "corral.actions.proxy_head",
    "corral.actions.upstreams",
    "corral.http.upstream",
    "corral.fastcgi.answer",
    "corral.fastcgi.client",
    "corral.fastcgi.params",
    "corral.fastcgi.records",
    "corral.php.site",
    "corral.php.apps",
    "corral.routing.request",
    "corral.routing.router",
    "corral.routing.conditions",
    "corral.routing.patterns",
    "corral.routing.variables",
    "corral.routing.compiler",
]


def _missing_tools() -> str | None:
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"a C compiler ({compiler})"
    headers = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(headers, "Python.h")):
        return f"the Python headers ({headers}/Python.h)"
    return None


class BuildCore(build_ext):
    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # the modules compile one per core, not one after another
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        missing = _missing_tools()
        if missing is not None:
            sys.exit(
                f"corral: building the compiled core needs {missing}: on Debian or Ubuntu "
                "`apt-get install gcc python3-dev`; or build the pure-Python core with "
                "CORRAL_NO_EXTENSIONS=1"
            )
        super().run()


def _extensions() -> list[Extension]:
    if os.environ.get("CORRAL_NO_EXTENSIONS", "") not in ("", "0"):
        return []
    from Cython.Build import cythonize

    def source(name: str, suffix: str) -> Extension:
        # no debug information (-g0 after Python's own CFLAGS, which often hold -g): it was
        # 13.7 of the 16.6 MB of compiled modules; the code is the same, and the symbol table
        # stays, so that profilers (callgrind, perf) still name the functions
        return Extension(
            name, [os.path.join("src", *name.split(".")) + suffix], extra_compile_args=["-g0"]
        )

    sources = [source(name, ".pyx") for name in MODULES] + [source(name, ".py") for name in TWINS]
    # annotations stay documentation: only the .pxd files type (a Python annotation such as
    # `data: bytes` would otherwise refuse the bytearray the code itself converts)
    directives = {"language_level": "3", "annotation_typing": False}
    return cythonize(
        sources, compiler_directives=directives, quiet=True, nthreads=os.cpu_count() or 1
    )


# the user documentation, to <prefix>/share/doc/corral/ (`corral --help` names the directory);
# the LICENSE is in the wheel's metadata already
DOCS = [*sorted(glob.glob("docs/*.md")), "README.md"]

setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": BuildCore},
    data_files=[("share/doc/corral", DOCS)],
)

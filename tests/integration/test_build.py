"""Building corral: the compiled core by default, the Python core on request, and one line
(not a compiler's error) when the compiler or the Python headers are missing; what the sdist
and the wheel hold, and the wheel installed where there is no compiler.

Each build runs pip (no build isolation: the suite's own setuptools and Cython) on a copy of
this checkout in a temporary directory. The release (the sdist, then `pip wheel .` in the
tree it unpacks to, the README's commands) is built once for the module's tests.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.server import Server, http_get
from tests.integration.venvs import site_packages

ROOT = Path(__file__).resolve().parents[2]
# the parser written in Cython, and the request path's modules compiled as they are
# (setup.py's MODULES and TWINS)
COMPILED = [
    "corral/actions/application",
    "corral/actions/external",
    "corral/actions/fastcgi",
    "corral/actions/proxy",
    "corral/actions/proxy_head",
    "corral/actions/share",
    "corral/actions/upstreams",
    "corral/apps/asgi/adapter",
    "corral/apps/asgi/body",
    "corral/apps/asgi/runner",
    "corral/apps/asgi/scope",
    "corral/apps/wsgi/environ",
    "corral/apps/wsgi/response",
    "corral/apps/wsgi/runner",
    "corral/fastcgi/answer",
    "corral/fastcgi/client",
    "corral/fastcgi/params",
    "corral/fastcgi/records",
    "corral/filters/connlimit",
    "corral/filters/forwarded",
    "corral/filters/gate",
    "corral/filters/ratelimit",
    "corral/http/_parser",
    "corral/http/chunked",
    "corral/http/head",
    "corral/http/response",
    "corral/http/upstream",
    "corral/php/apps",
    "corral/php/site",
    "corral/routing/compiler",
    "corral/routing/conditions",
    "corral/routing/patterns",
    "corral/routing/request",
    "corral/routing/router",
    "corral/routing/variables",
    "corral/server/acceptor",
    "corral/server/bodyclock",
    "corral/server/connection",
    "corral/server/exchange",
    "corral/server/routed",
    "corral/server/tlstransport",
    "corral/static/answer",
    "corral/static/files",
]
# the wheel's files: 32 MB when it held Cython's C (14.5 MB) and the compiled modules' debug
# information; 3.9 MB without them as pip builds it, 4.9 MB at these tests' -O0, and 0.3 MB
# more with the documentation (share/doc/corral); 8.4 MB at -O0 once routing and the share
# action were compiled too (nine more twins); 10.7 MB with the rate limit's and the TLS
# transport's (twenty-five twins); 12.9 MB with the FastCGI and proxy modules (thirty-seven
# twins, issue 35); 14.3 MB with php's script choice and application, and the way to an
# application (forty-one twins). Either coming back passes this bound by far; a tenth of it
# is room for the code to grow
WHEEL_BOUND = 16_000_000
# the pages setup.py's data_files install to <prefix>/share/doc/corral, beside README.md
USER_DOCS = sorted(f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md"))
# a compiled build's environment: the suite may run with the Python core asked for
BUILD_ENV = {key: value for key, value in os.environ.items() if key != "CORRAL_NO_EXTENSIONS"}
# what the modules hold, not how fast they run: unoptimised, they compile in a sixth of the
# time (11 s against 65 on two cores)
QUICK = {"CFLAGS": "-O0"}
# the sdist into the directory named by its argument; its file name on the last line
SDIST = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
# builds compile the core (a wheel took 29 s in a whole run); each sdist or wheel step below is
# given 300 s, and the release fixture takes two of them in its first test
pytestmark = pytest.mark.timeout(660)


def copy_checkout(dest: Path) -> Path:
    """The checkout's sources at ``dest``, without what a build or a test run left (a build
    writes beside the sources)."""
    shutil.copytree(
        ROOT,
        dest,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "bench", "tests", "*.so", "*.c", "build", "*.egg-info", "__pycache__"
        ),
    )
    return dest


def pip_wheel(source: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=source,
    )


def build(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """A wheel of a copy of the checkout, and the names it holds (none when it failed)."""
    source = copy_checkout(tmp_path / "src")
    out = tmp_path / "wheels"
    result = pip_wheel(source, out, {**BUILD_ENV, **env})
    names = []
    for wheel in out.glob("*.whl") if out.exists() else []:
        with zipfile.ZipFile(wheel) as archive:
            names += archive.namelist()
    return result, names


@dataclass
class Release:
    sdist: list[str]  # the names in the sdist, without its top directory
    wheel: Path


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The sdist (setuptools' PEP 517 hook, as `python -m build` calls it), then the wheel that
    `pip wheel .` builds in the tree the sdist unpacks to: what a user without the checkout
    builds, and the proof that the sdist holds what a build needs."""
    root = tmp_path_factory.mktemp("release")
    source = copy_checkout(root / "checkout")
    made = subprocess.run(
        [sys.executable, "-c", SDIST, str(root / "dist")],
        capture_output=True,
        text=True,
        timeout=300,
        env=BUILD_ENV,
        cwd=source,
    )
    assert made.returncode == 0, made.stderr
    with tarfile.open(root / "dist" / made.stdout.split()[-1]) as sdist:
        members = sdist.getnames()
        sdist.extractall(root / "unpacked", filter="data")
    top = members[0].partition("/")[0]
    built = pip_wheel(root / "unpacked" / top, root / "wheels", {**BUILD_ENV, **QUICK})
    assert built.returncode == 0, built.stderr
    (wheel,) = (root / "wheels").glob("*.whl")
    return Release([name.partition("/")[2] for name in members], wheel)


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def elf_sections(image: bytes) -> list[str]:
    """The section names of a 64-bit little-endian ELF file, from its section header table."""
    assert image[:6] == b"\x7fELF\x02\x01", image[:6]
    (table,) = struct.unpack_from("<Q", image, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", image, 0x3A)

    def header(index: int) -> tuple[int, int, int]:  # sh_name, sh_offset, sh_size
        name, _, _, _, offset, size = struct.unpack_from(
            "<IIQQQQ", image, table + index * entry_size
        )
        return name, offset, size

    _, offset, size = header(names_index)
    strings = image[offset : offset + size]
    return [
        strings[name : strings.index(b"\0", name)].decode()
        for name, _, _ in map(header, range(count))
    ]


def test_the_wheel_holds_the_compiled_core_and_its_python_twin(release: Release) -> None:
    names = list(wheel_files(release.wheel))
    assert sorted(name.partition(".")[0] for name in names if name.endswith(".so")) == COMPILED
    for module in COMPILED:  # each with its Python twin (the parser's is parser.py)
        assert module.replace("_parser", "parser") + ".py" in names


def test_the_sdist_holds_the_sources_and_no_generated_c(release: Release) -> None:
    # the build's files, the compiled modules' sources and the .pxd typing each twin; what
    # Cython generates from them is made again by each build
    for name in ["setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md"]:
        assert name in release.sdist
    # the user documentation, which the wheel installs
    assert sorted(n for n in release.sdist if n.startswith("docs/")) == USER_DOCS
    for module in COMPILED:
        source = ".pyx" if module.endswith("_parser") else ".py"
        assert f"src/{module}{source}" in release.sdist
        if source == ".py":
            assert f"src/{module}.pxd" in release.sdist
    assert not [name for name in release.sdist if name.endswith((".c", ".so"))]


def test_the_wheel_is_lean_and_licensed(release: Release) -> None:
    files = wheel_files(release.wheel)
    # what runs, not what it was built from (the sdist's): no C, no .pyx, no .pxd
    assert not [name for name in files if name.endswith((".c", ".pyx", ".pxd"))]
    for name, image in files.items():
        if name.endswith(".so"):
            sections = elf_sections(image)
            # the symbol table stays, for profilers; what -g adds does not
            assert ".text" in sections and ".symtab" in sections, (name, sections)
            debug = [section for section in sections if section.startswith((".debug", ".zdebug"))]
            assert not debug, (name, debug)
    total = sum(len(content) for content in files.values())
    assert total < WHEEL_BOUND, f"{total:,} bytes unpacked"
    license_text = files["corral-0.1.0.dist-info/licenses/LICENSE"].decode()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n")
    metadata = files["corral-0.1.0.dist-info/METADATA"].decode()
    assert "\nLicense-Expression: MIT\n" in metadata


def test_the_wheel_installs_and_serves_without_a_compiler(release: Release, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    # no compiler to be found: nothing on PATH but the virtualenv, CC a program that fails;
    # and the compiled core (the suite may run with the Python core asked for)
    bare = {"PATH": str(bin_dir), "CC": "/bin/false", "PYTHONPATH": "", "CORRAL_NO_EXTENSIONS": "0"}
    env = BUILD_ENV | bare
    # corral's dependencies are this suite's own (no network), found after the virtualenv's
    # site-packages, where corral is installed: a .pth line adds their directory to the path,
    # and only that (the .pth of the suite's editable corral in it does not run)
    site = site_packages(venv)
    (site / "suite-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
            str(release.wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert installed.returncode == 0, installed.stderr
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import corral; print(corral.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert where.stdout == f"{site / 'corral' / '__init__.py'}\n", (where.stdout, where.stderr)
    version = subprocess.run(
        [str(bin_dir / "corral"), "--version"], capture_output=True, text=True, env=env
    )
    assert version.stdout == "corral 0.1.0 (compiled core)\n", (version.stdout, version.stderr)
    # the documentation is installed with it, and --help says where, whatever the directory
    docs = venv / "share" / "doc" / "corral"
    installed = sorted(page.name for page in docs.iterdir())
    assert installed == sorted(["README.md", *(name.removeprefix("docs/") for name in USER_DOCS)])
    for page in installed:
        source = ROOT / ("README.md" if page == "README.md" else f"docs/{page}")
        assert (docs / page).read_bytes() == source.read_bytes(), page
    helped = subprocess.run(
        [str(bin_dir / "corral"), "--help"],
        capture_output=True,
        text=True,
        env=env | {"COLUMNS": "1000"},
        cwd=tmp_path,
    )
    assert f"The documentation is in {docs}: settings.md (" in helped.stdout, helped.stderr
    # from the checkout's root, where examples/ is (src/ is not on the path)
    with Server(
        "examples.hello", python=str(bin_dir / "python"), env=bare, cwd=str(ROOT)
    ) as server:
        assert http_get(server) == (200, b"Hello, world!\n")
        assert "compiled core" in server.stderr


def test_corral_no_extensions_builds_the_python_core_only(tmp_path: Path) -> None:
    result, names = build(tmp_path, CORRAL_NO_EXTENSIONS="1", CC="/nonexistent/cc")
    assert result.returncode == 0, result.stderr
    assert not [name for name in names if name.endswith(".so")]
    assert "corral/http/parser.py" in names


def test_without_a_compiler_the_build_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    result, names = build(tmp_path, CC="/nonexistent/cc")
    assert result.returncode != 0 and not names
    # pip indents what the build printed; the line itself is whole
    lines = [line.strip() for line in result.stderr.splitlines() if "corral: " in line]
    assert lines == [
        "corral: building the compiled core needs a C compiler (/nonexistent/cc): on Debian or "
        "Ubuntu `apt-get install gcc python3-dev`; or build the pure-Python core with "
        "CORRAL_NO_EXTENSIONS=1"
    ], result.stderr

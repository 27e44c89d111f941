"""Opening a share's file so that it stays where the share allows: under ``chroot``, through
no symbolic link (``follow_symlinks: false``), across no mount (``traverse_mounts: false``).

The kernel decides, not the path string: every restricted open is one ``openat2(2)`` with
``RESOLVE_BENEATH`` (under the chroot's directory), ``RESOLVE_NO_SYMLINKS`` and
``RESOLVE_NO_XDEV``, so a ``..``, a symlink or a mount met on the way is refused while the
path is resolved, and no check-then-open race is possible. Where the kernel has no openat2
(Linux before 5.6, or a seccomp filter that refuses it), :func:`_walk` does the same one
component at a time: ``openat`` with ``O_NOFOLLOW`` from the directory opened before, a
symlink read and followed by hand (or refused), ``..`` taken back along the directories
walked (refused at the chroot's top), the device compared at each step (a bind mount of the
same filesystem is not seen there: openat2 sees it).

NGINX Unit's rules, kept: a path that does not start with the ``chroot`` (repeated slashes
aside) or that is the chroot itself is refused (``EACCES``); without chroot, an absolute path
is resolved from ``/`` and a relative one from the working directory. Unit resolves a chroot
with ``RESOLVE_IN_ROOT`` (an absolute symlink inside it restarts at the chroot); corral uses
``RESOLVE_BENEATH`` as the issue asks: such a symlink is refused (``EXDEV``), never followed.

Every descriptor is opened ``O_CLOEXEC`` and ``O_NONBLOCK`` (a FIFO in the tree must not
block the loop in ``open``); the caller owns the one returned and closes it. The errors are
``OSError`` with the errno the kernel would give: the caller maps them to statuses.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections import deque
from collections.abc import Callable

__all__ = ["NO_SYMLINKS", "NO_XDEV", "chroot_relative", "has_openat2", "open_file"]

# struct open_how's resolve bits (linux/openat2.h)
NO_XDEV = 0x01
_NO_MAGICLINKS = 0x02
NO_SYMLINKS = 0x04
_BENEATH = 0x08

_SYS_OPENAT2 = 437  # one number on every architecture: openat2 came after their unification
_MAX_LINKS = 40  # the kernel's limit of symlinks followed in one resolution (ELOOP past it)

_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


def _load_openat2() -> Callable[..., int] | None:
    """libc's ``syscall`` set up for openat2, or None where the kernel refuses it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = (
        ctypes.c_long,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(_OpenHow),
        ctypes.c_size_t,
    )
    how = _OpenHow(_DIR_PATH, 0, _BENEATH)
    fd = syscall(_SYS_OPENAT2, -100, b".", ctypes.byref(how), ctypes.sizeof(how))  # AT_FDCWD
    if fd < 0:
        return None  # ENOSYS, or EPERM from a seccomp profile that predates openat2
    os.close(fd)
    return syscall


_syscall = _load_openat2()
# one open_how per resolve value, made once
_hows: dict[int, _OpenHow] = {}


def has_openat2() -> bool:
    """Whether this kernel opens with openat2 (else the component walk stands in)."""
    return _syscall is not None


def chroot_relative(chroot: bytes, path: bytes) -> bytes | None:
    """``path`` below ``chroot``, without its leading slashes; None when it is not below it
    (or is the chroot itself). Repeated slashes in either compare as one, as Unit does."""
    root = [part for part in chroot.split(b"/") if part]
    parts = path.split(b"/")
    if chroot.startswith(b"/") != path.startswith(b"/"):
        return None
    i = 0
    for name in root:
        while i < len(parts) and not parts[i]:
            i += 1
        if i == len(parts) or parts[i] != name:
            return None
        i += 1
    rest = b"/".join(parts[i:]).lstrip(b"/")
    return rest or None


def open_file(
    path: bytes, chroot: bytes | None = None, resolve: int = 0, *, openat2: bool | None = None
) -> int:
    """A descriptor open for reading on ``path`` (a file or a directory), resolved under
    ``chroot`` when given, with ``resolve`` (`NO_SYMLINKS`, `NO_XDEV`) applied to every
    component. ``openat2``: None uses it where the kernel has it; False forces the
    component walk (tests run both). Raises ``OSError``."""
    if b"\x00" in path:
        raise OSError(errno.ENOENT, "NUL in path")
    if chroot is None and not resolve:
        return os.open(path, _READ)  # nothing to enforce: the kernel's plain open
    rest = path
    base = -100  # AT_FDCWD
    if chroot is not None:
        relative = chroot_relative(chroot, path)
        if relative is None:
            raise OSError(errno.EACCES, "outside the chroot", path)
        rest = relative
        base = os.open(chroot, _DIR_PATH)
    try:
        if openat2 is False or _syscall is None:
            return _walk(base, rest, chroot is not None, resolve)
        flags = resolve | _NO_MAGICLINKS | (_BENEATH if chroot is not None else 0)
        how = _hows.get(flags)
        if how is None:
            how = _hows[flags] = _OpenHow(_READ, 0, flags)
        fd = _syscall(_SYS_OPENAT2, base, rest, ctypes.byref(how), ctypes.sizeof(how))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd
    finally:
        if base >= 0:
            os.close(base)


def _walk(base: int, path: bytes, beneath: bool, resolve: int) -> int:
    """openat2's resolution done one component at a time (see the module's docstring)."""
    no_symlinks = resolve & NO_SYMLINKS
    no_xdev = resolve & NO_XDEV
    if path.startswith(b"/"):
        start = os.open(b"/", _DIR_PATH)
    else:
        start = os.open(b".", _DIR_PATH, dir_fd=base if base >= 0 else None)
    stack = [start]  # the directories walked, each one's parent below it
    device = os.fstat(start).st_dev
    parts = deque(path.split(b"/"))
    links = 0
    try:
        while parts:
            name = parts.popleft()
            if not name or name == b".":
                continue
            if name == b"..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    continue
                if beneath:
                    raise OSError(errno.EXDEV, "'..' above the chroot")
                parent = os.open(b"..", _DIR_PATH, dir_fd=stack[0])
                os.close(stack[0])
                stack[0] = parent
                if no_xdev and os.fstat(parent).st_dev != device:
                    raise OSError(errno.EXDEV, "a mount point on the way")
                continue
            here = stack[-1]
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=here)
            info = os.fstat(fd)
            if stat.S_ISLNK(info.st_mode):
                os.close(fd)
                links += 1
                if no_symlinks or links > _MAX_LINKS:
                    raise OSError(errno.ELOOP, "a symbolic link on the way")
                target = os.readlink(name, dir_fd=here)
                if target.startswith(b"/"):
                    if beneath:
                        raise OSError(errno.EXDEV, "an absolute symbolic link under a chroot")
                    while len(stack) > 1:
                        os.close(stack.pop())
                    root = os.open(b"/", _DIR_PATH)
                    os.close(stack[0])
                    stack[0] = root
                    if no_xdev and os.fstat(root).st_dev != device:
                        raise OSError(errno.EXDEV, "a mount point on the way")
                parts.extendleft(reversed(target.split(b"/")))
                continue
            if no_xdev and info.st_dev != device:
                os.close(fd)
                raise OSError(errno.EXDEV, "a mount point on the way")
            if not parts or not any(part not in (b"", b".") for part in parts):
                os.close(fd)
                # the last component: open it to read, refusing a symlink swapped in meanwhile
                opened = os.open(name, _READ | os.O_NOFOLLOW, dir_fd=here)
                if no_xdev and os.fstat(opened).st_dev != device:
                    os.close(opened)
                    raise OSError(errno.EXDEV, "a mount point on the way")
                if parts and not stat.S_ISDIR(os.fstat(opened).st_mode):
                    os.close(opened)
                    raise OSError(errno.ENOTDIR, "not a directory", name)
                return opened
            if not stat.S_ISDIR(info.st_mode):
                os.close(fd)
                raise OSError(errno.ENOTDIR, "not a directory", name)
            stack.append(fd)
        return os.open(b".", _READ | os.O_DIRECTORY, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)

"""The request's start, read precisely: CLOCK_MONOTONIC, one clock for every process of a boot.

The compiled core reads it straight from C (``clock.pxd``: ``clock_gettime``, no Python
call); the Python core calls :func:`time.monotonic`, the same clock on Linux.
"""

from time import monotonic as now

__all__ = ["now"]

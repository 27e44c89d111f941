# The compiled twin of clock.py's now(): cimported by the compiled core (connection.pxd).

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef inline double now() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9

# The compiled twin of ratelimit.py's RateTable: the same algorithm, its word operations
# atomic instructions (atomic.pxd) instead of the Python core's lock of the table's file.

cimport cython
from libc.stdint cimport uint64_t

from corral.filters cimport atomic
from corral.filters.forwarded cimport client_address
from corral.server cimport clock
from corral.server.exchange cimport Exchange

cdef Py_ssize_t PROBES, REFUSED, DELAYED
cdef long long ADMITTED


cdef class RateTable:
    cdef public Py_ssize_t slots
    cdef public int fd
    cdef object memory
    cdef readonly object view
    cdef uint64_t* words
    cdef readonly Py_ssize_t mask

    @cython.locals(mark=uint64_t, at=cython.longlong, old=cython.longlong, tat=cython.longlong,
                   excess=cython.longlong, slot=Py_ssize_t)
    cpdef long long take(self, str key, double now, long long interval, long long tolerance,
                         long long delay) except? -1

    @cython.locals(first=Py_ssize_t, probe=Py_ssize_t, slot=Py_ssize_t, refilled=Py_ssize_t,
                   refilled_tat=uint64_t, held=uint64_t, tat=uint64_t)
    cdef Py_ssize_t _slot(self, uint64_t mark) except -1
    cpdef tuple counts(self)


cdef class Limiter:
    cdef public RateTable table
    cdef public long long interval
    cdef public long long tolerance
    cdef public long long delay
    cdef public int status
    cdef public object key

    @cython.locals(now=double, wait=cython.longlong, retry=cython.longlong)
    cpdef bint refuses(self, object conn, Exchange exchange, object peer, object route) except -1
    cpdef str _templated(self, object conn, Exchange exchange)

# The compiled twin of connlimit.py: the same algorithm, its word operations atomic
# instructions (atomic.pxd) instead of the Python core's lock of the table's file.

cimport cython
from libc.stdint cimport uint64_t

from corral.filters cimport atomic
from corral.filters.forwarded cimport client_address
from corral.server.exchange cimport Exchange


cdef class ConnTable:
    cdef public Py_ssize_t seats
    cdef public Py_ssize_t stride
    cdef public Py_ssize_t slots
    cdef public int fd
    cdef object memory
    cdef readonly object view
    cdef uint64_t* words

    @cython.locals(mark=uint64_t, slot=Py_ssize_t)
    cpdef Py_ssize_t hold(self, str key, Py_ssize_t limit, Py_ssize_t seat) except? -2
    cpdef release(self, Py_ssize_t slot, Py_ssize_t seat)
    @cython.locals(total=cython.longlong, seat=Py_ssize_t)
    cdef long long _sum(self, Py_ssize_t slot) noexcept
    @cython.locals(first=Py_ssize_t, probe=Py_ssize_t, slot=Py_ssize_t, held=uint64_t)
    cdef Py_ssize_t _slot(self, uint64_t mark) noexcept
    @cython.locals(slot=Py_ssize_t)
    cpdef clear(self, Py_ssize_t seat)
    @cython.locals(mark=uint64_t, first=Py_ssize_t, probe=Py_ssize_t, slot=Py_ssize_t)
    cpdef long long count(self, str key)


cdef class ConnGate:
    cdef public ConnTable table
    cdef public Py_ssize_t limit
    cdef public int status
    cdef public ConnTable total
    cdef public Py_ssize_t total_limit
    cdef public Py_ssize_t seat

    @cython.locals(key=str, slot=Py_ssize_t, total_slot=Py_ssize_t)
    cpdef bint refuses(self, object conn, Exchange exchange, object peer, tuple held) except -1
    @cython.locals(held=tuple)
    cpdef release(self, object conn)
    cpdef bint _refuse(self, object conn, Exchange exchange, int status, str reason) except -1

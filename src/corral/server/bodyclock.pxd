# Types of bodyclock.py when compiled (setup.py's TWINS); the .py is the Python core.

from corral.server.exchange cimport Exchange

cdef double STOPPED

cdef class BodyClock:
    cdef public double timeout
    cdef public double rate
    cdef public double grace
    cdef public double since
    cdef public Py_ssize_t received

    cpdef double start(self, double now, Exchange exchange, bint paused)
    cpdef double read(self, double now, Py_ssize_t count, bint paused)
    cpdef double deadline(self, double now)

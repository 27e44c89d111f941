# Types of forwarded.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef class Forwarding:
    cdef public object trusted
    cdef public object _verdicts
    cdef public bint recursive
    cdef public object client_ip
    cdef public object protocol
    cdef public frozenset _lengths

    cpdef bint trusts(self, object peer)

    @cython.locals(values=list, name=bytes, value=bytes, lowered=bytes)
    cpdef resolve(self, list headers)

# Types of forwarded.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.server.exchange cimport Exchange

cdef class ForwardedClient:
    cdef public str address
    cdef public object port
    cdef public object scheme

cdef class Forwarding:
    cdef public object trusted
    cdef public object _verdicts
    cdef public bint recursive
    cdef public object client_ip
    cdef public object protocol
    cdef public Py_ssize_t _ip_length
    cdef public Py_ssize_t _protocol_length

    cpdef bint trusts(self, object peer)

    @cython.locals(values=list, name=bytes, value=bytes, lowered=bytes, length=Py_ssize_t,
                   ip_length=Py_ssize_t, protocol_length=Py_ssize_t)
    cpdef resolve(self, list headers)

@cython.locals(forwarded=ForwardedClient)
cpdef str client_address(object peer, Exchange exchange)

# Types of gate.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.filters.forwarded cimport ForwardedClient
from corral.server.exchange cimport Exchange


cdef class ClientCheck:
    cpdef bint refuses(self, object conn, Exchange exchange) except -1


cdef class Refused(ClientCheck):
    cdef public int status


cdef class ClientGate(ClientCheck):
    cdef public tuple steps
    cdef public dict refusals

    cpdef int status_of(self, object client) except -1
    cpdef object for_client(self, object conn)


cdef class ProxiedClients(ClientCheck):
    cdef public ClientGate gate
    cdef public int peer_status
    cdef public object client
    cdef public int client_status

    @cython.locals(forwarded=ForwardedClient, status=int)
    cpdef bint refuses(self, object conn, Exchange exchange) except -1

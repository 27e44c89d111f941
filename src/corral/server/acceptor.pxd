# Types of acceptor.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef class LoadBoard:
    cdef readonly Py_ssize_t slots
    cdef readonly int fd
    cdef object _map
    cdef int[::1] _counts

    cpdef publish(self, Py_ssize_t slot, int count)
    cpdef leave(self, Py_ssize_t slot)
    @cython.locals(least=int, count=int, other=Py_ssize_t)
    cpdef object least_besides(self, Py_ssize_t slot)

cdef class WatchedConnections(set):
    cdef public object on_change
    cdef public object on_leave
    cdef set _gone

    cpdef Py_ssize_t held(self)

cdef class AcceptGate:
    cdef public LoadBoard board
    cdef public Py_ssize_t slot
    cdef public Py_ssize_t share
    cdef public WatchedConnections connections
    cdef public Py_ssize_t pending
    cdef public list acceptors
    cdef public bint open

    cpdef Py_ssize_t held(self)
    @cython.locals(held=Py_ssize_t)
    cpdef Py_ssize_t room(self, bint stalled)
    cpdef publish(self)
    cpdef _set_up(self)

cdef class BalancedAcceptor:
    cdef object _loop
    cdef object _sock
    cdef object _factory
    cdef AcceptGate _gate
    cdef object _log
    cdef object _door
    cdef bint _reading
    cdef bint _closed
    cdef object _declined_at
    cdef bint _nodelay
    cdef int _family
    cdef int _type
    cdef object _poller

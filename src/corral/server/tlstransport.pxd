# Types of tlstransport.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef int FIRST, REFUSED, HANDSHAKE, OPEN, CLOSING, CLOSED, _HANDSHAKE_RECORD
cdef Py_ssize_t READ_SIZE, MOST, HOLD_MOST
cdef object _READ_BUFFER, _WantRead, _SSLError

cdef class TlsTransport:
    cdef public object context
    cdef public object factory
    cdef public object finished
    cdef public bint holding
    cdef public Py_ssize_t held
    cdef public object incoming
    cdef public object loop
    cdef public object outgoing
    cdef public bint paused
    cdef public bint peer_done
    cdef public object protocol
    cdef public object raw
    cdef public object sslobj
    cdef public int state
    cdef public double timeout
    cdef public object timer
    cdef public object tls

    cpdef _received(self, data)
    cpdef _refuse(self, int first)
    cpdef _handshake(self)
    @cython.locals(available=Py_ssize_t)
    cpdef _decrypt(self)
    cpdef _client_done(self)
    cpdef _send(self)
    cpdef _fail(self, exc)
    cpdef write(self, data)
    cpdef close(self)
    cpdef abort(self)

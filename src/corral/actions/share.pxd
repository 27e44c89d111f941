# Types of share.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange
from corral.static.answer cimport StaticAnswer

@cython.locals(answer=StaticAnswer, reply=FileReply)
cpdef bint share(HttpConnection conn, Exchange exchange, object action) except -1

cdef class FileReply:
    cdef public StaticAnswer answer
    cdef public HttpConnection conn
    cdef public Exchange exchange
    cdef public Py_ssize_t offset
    cdef public Py_ssize_t count

    cpdef feed(self, chunk)
    cpdef finish(self)
    cpdef fail(self)
    cpdef close(self)
    cpdef take_body(self, HttpConnection conn, Exchange exchange)
    @cython.locals(answer=StaticAnswer, wire=tuple, head=bytes, data=bytes, length=Py_ssize_t)
    cpdef start(self, HttpConnection conn, Exchange exchange)

@cython.locals(status=int, text=str, fields=list, body=bytes, length=Py_ssize_t)
cpdef tuple _wire(StaticAnswer answer)

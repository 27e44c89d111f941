# Types of runner.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.apps.asgi.body cimport AsgiBody
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef dict _STATUS_TEXT  # its get is then the C API's
cpdef str _status_text(object status)
@cython.locals(out=list, fields=dict, field=object)
cpdef list _str_headers(object headers)
cpdef tuple _str_field(object header)

cdef class Sent:
    pass

cdef class AsgiCycle:
    cdef public object after
    cdef public AsgiBody body
    cdef public bint complete
    cdef public HttpConnection conn
    cdef public object deadline
    cdef public Exchange exchange
    cdef public object extensions
    cdef public list headers
    cdef public object log
    cdef public object status
    cdef public object task
    cdef public set tasks
    cdef public bint timed_out
    cdef public int trailers

    cpdef _send(self, dict message)
    @cython.locals(conn=HttpConnection, exchange=Exchange, out=bytes)
    cpdef bint _write_body(self, object data, object more) except -1
    cpdef bytes _start_head(self, object body_length)
    @cython.locals(exchange=Exchange)
    cpdef _end(self, bytes out)
    @cython.locals(conn=HttpConnection, exchange=Exchange)
    cpdef _give_up(self)
    cpdef _failed(self, object exc)
    cpdef _incomplete(self)
    cpdef _wrap_up(self)

cdef class CycleCoroutine:
    cdef public AsgiCycle cycle
    cdef public object app
    cdef public object scope
    cdef public object cr_await
    cdef public object first
    cdef public object raised

    cpdef object _step(self)
    @cython.locals(cycle=AsgiCycle)
    cpdef object _call(self)
    @cython.locals(cycle=AsgiCycle)
    cpdef _end(self, object exc)

# Types of response.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.apps.wsgi.environ cimport ConnectionEnviron
from corral.http.head cimport RequestHead
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef class Output:
    cdef public bint on_loop

    cpdef write(self, bytes data)
    cpdef complete(self, bytes data, bint keep_alive)
    cpdef finish(self, bint keep_alive)

cdef class WsgiCall:
    cdef public object app
    cdef public ConnectionEnviron environ
    cdef public HttpConnection conn
    cdef public Exchange exchange
    cdef public Output out
    cdef public object log
    cdef public object status
    cdef public object headers
    cdef public object result
    cdef public object iterator

    cpdef bytes _head(self, object body_length)
    cpdef run(self)
    @cython.locals(environ=dict, exchange=Exchange)
    cpdef _run(self)

@cython.locals(call=WsgiCall)
cpdef WsgiCall make_call(tuple targets, object log, HttpConnection conn, Exchange exchange,
                         Output out, ConnectionEnviron environ)

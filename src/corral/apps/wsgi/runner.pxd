# Types of runner.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.apps.wsgi.response cimport Output, make_call
from corral.server.connection cimport Adapter, HttpConnection
from corral.server.exchange cimport Exchange

cdef class LoopOutput(Output):
    cdef public HttpConnection conn

    cpdef write(self, bytes data)
    cpdef complete(self, bytes data, bint keep_alive)
    cpdef finish(self, bint keep_alive)

cdef class WsgiAdapter(Adapter):
    cdef public object watchdog
    cdef public tuple targets
    cdef public Py_ssize_t threads
    cdef public object body_buffer_size
    cdef public Py_ssize_t response_buffer_size
    cdef public Py_ssize_t response_spool_size
    cdef public bint request_buffering
    cdef public object body_temp_dir
    cdef public object multiprocess
    cdef public object log
    cdef public object errors
    cdef public object pool
    cdef public object _helper
    cdef public dict _listener_environs
    cdef public object _answers
    cdef public bint _woken
    cdef public bint _wake_planned

    cpdef make_body(self, HttpConnection conn, Exchange exchange)
    # job: an object, not the call's type, for the bound run() a thread calls
    @cython.locals(job=object, out=Output)
    cpdef run(self, HttpConnection conn, Exchange exchange)

cdef class ThreadOutput(Output):
    cdef public WsgiAdapter adapter
    cdef public HttpConnection conn
    cdef public Exchange exchange
    cdef public object loop
    cdef public object _buffer

    cpdef write(self, bytes data)
    cpdef complete(self, bytes data, bint keep_alive)
    cpdef finish(self, bint keep_alive)

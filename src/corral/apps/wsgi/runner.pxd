# Types of runner.py when compiled (setup.py's TWINS); the .py is the Python core.

from corral.server.connection cimport HttpConnection

cdef class LoopOutput:
    cdef public HttpConnection conn

cdef class WsgiAdapter:
    cdef public object watchdog
    cdef public tuple targets
    cdef public object app
    cdef public Py_ssize_t threads
    cdef public object body_buffer_size
    cdef public object multiprocess
    cdef public object log
    cdef public object errors
    cdef public object pool
    cdef public object _helper
    cdef public Py_ssize_t free
    cdef public object waiting
    cdef public dict _listener_environs

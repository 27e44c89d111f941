# Types of adapter.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.apps.asgi.body cimport AsgiBody
from corral.apps.asgi.runner cimport AsgiCycle, CycleCoroutine
from corral.apps.asgi.scope cimport request_scope
from corral.server.connection cimport Adapter, HttpConnection
from corral.server.exchange cimport Exchange

cdef class AsgiAdapter(Adapter):
    cdef public tuple targets
    cdef public tuple lifespan_targets
    cdef public object log
    cdef public dict state
    cdef public set tasks
    cdef public object websocket
    cdef public set sessions
    cdef public double request_timeout
    cdef public double request_timeout_grace
    cdef public CycleCoroutine eager
    cdef public object context

    cpdef make_body(self, HttpConnection conn, Exchange exchange)
    @cython.locals(
        cycle=AsgiCycle, coro=CycleCoroutine, eager=bint, last=CycleCoroutine, context=object
    )
    cpdef run(self, HttpConnection conn, Exchange exchange)
    cpdef client_gone(self, HttpConnection conn)

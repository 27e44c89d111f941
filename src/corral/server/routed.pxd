# Types of routed.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport RequestHead, RequestSink
from corral.routing.request cimport RouteRequest
from corral.routing.router cimport Router
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef class RouteState(RequestSink):
    cdef public HttpConnection conn
    cdef public Router router
    cdef public object files  # static.files.StaticFiles, None without shares
    cdef public str pass_target
    cdef public object given_peer
    cdef public bint counted_ahead
    cdef public object given_tls
    cdef public bytes initial
    cdef public Py_ssize_t hops
    cdef public object local
    cdef public object pair
    cdef public object raw
    cdef public object raw_first
    cdef public Py_ssize_t begun
    cdef public Py_ssize_t routed
    cdef public bint in_message
    cdef public Exchange handoff
    cdef public object sender
    cdef public RouteRequest request
    cdef public Py_ssize_t fallbacks
    cdef public object watch
    cdef public bint relay_draining

    cpdef bint received(self, data) except -1
    cpdef on_message_begin(self)
    cpdef bint route(self, Exchange exchange) except -1
    cpdef bint act(self, Exchange exchange, object action) except -1
    @cython.locals(request=RouteRequest, router=Router, local=object)
    cpdef object resolve(self, Exchange exchange)
    cpdef object local_address(self)
    cpdef on_request(self, RequestHead head)
    cpdef on_body(self, chunk)
    cpdef on_request_end(self)


@cython.locals(head=RequestHead, peer=object, scheme=str)
cpdef RouteRequest route_request(HttpConnection conn, Exchange exchange, object local)

# Types of proxy.py when compiled (setup.py's TWINS; the .py is the Python core): the ProxyCall
# of every proxied request, its fields in C and its methods called as C functions among
# themselves.

cimport cython

from corral.actions.proxy_head cimport answer_of, request_head
from corral.actions.upstreams cimport Upstream, UpstreamConnection, UpstreamServer
from corral.http.head cimport RequestHead
from corral.http.upstream cimport ResponseHead
from corral.server cimport clock
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef class ProxyCall

cdef dict _by_action
cdef frozenset _IDEMPOTENT

cpdef bint forward(HttpConnection conn, Exchange exchange, str address, object options=*) except -1
@cython.locals(entry=tuple)
cpdef bint proxy(HttpConnection conn, Exchange exchange, object action) except -1
cpdef bint proxy_to(HttpConnection conn, Exchange exchange, Upstream upstream) except -1

@cython.final
cdef class ProxySweep:
    cdef public set calls
    cdef public object loop
    cdef public object options
    cdef public double period
    cdef public object timer

    @cython.locals(period=double)
    cpdef watch(self, ProxyCall call)
    cpdef unwatch(self, ProxyCall call)
    cpdef _stop(self)
    @cython.locals(now=double, call=ProxyCall)
    cpdef _sweep(self)

cdef ProxySweep _SWEEP

@cython.final
cdef class ProxyCall:
    cdef public Upstream upstream
    cdef public object options
    cdef public HttpConnection conn
    cdef public Exchange exchange
    cdef public UpstreamServer server
    cdef public UpstreamConnection wire
    cdef public list tried
    cdef public list pending
    cdef public Py_ssize_t pending_size
    cdef public bint body_done
    cdef public bint chunked
    cdef public object upgrade
    cdef public bytes held
    cdef public bint delivered
    cdef public bint ended
    cdef public bint timed_out
    cdef public double activity
    cdef public bint watched
    cdef public object tunnel
    cdef public bint reused
    cdef public bint upstream_keeps
    cdef public bint queued

    cpdef ProxyCall take_body(self, HttpConnection conn, Exchange exchange)
    @cython.locals(wire=UpstreamConnection)
    cpdef bint feed(self, data) except -1
    cpdef finish(self)
    @cython.locals(wire=UpstreamConnection)
    cpdef feed_raw(self, bytes data)
    @cython.locals(conn=HttpConnection)
    cpdef fail(self)
    cpdef close(self)
    @cython.locals(head=RequestHead)
    cpdef start(self, HttpConnection conn, Exchange exchange)
    @cython.locals(server=UpstreamServer, kept=UpstreamConnection)
    cpdef _connect(self)
    @cython.locals(server=UpstreamServer)
    cpdef bint handed(self, UpstreamConnection wire) except -1
    cpdef _connected(self, UpstreamConnection wire, bint timed_out=*)
    @cython.locals(head=RequestHead, conn=HttpConnection, client=str, scheme=str, data=bytes)
    cpdef _send(self, UpstreamConnection wire, bint reused)
    @cython.locals(conn=HttpConnection, exchange=Exchange, status=str, fields=list, data=bytes)
    cpdef on_response(self, ResponseHead response)
    @cython.locals(out=bytes)
    cpdef on_body(self, data)
    @cython.locals(conn=HttpConnection, out=bytes, wire=UpstreamConnection)
    cpdef deliver(self)
    @cython.locals(wire=UpstreamConnection)
    cpdef _client_drained(self)
    @cython.locals(wire=UpstreamConnection, exchange=Exchange, conn=HttpConnection, last=bytes)
    cpdef on_response_end(self)
    @cython.locals(conn=HttpConnection)
    cpdef upstream_drained(self)
    @cython.locals(wire=UpstreamConnection, server=UpstreamServer)
    cpdef upstream_failed(self, str why, bint nothing_came=*)
    @cython.locals(wire=UpstreamConnection, options=object, limit=double)
    cpdef expired(self, double now)
    cpdef _over(self)
    @cython.locals(wire=UpstreamConnection)
    cpdef _drop_wire(self, bint abort)
    @cython.locals(conn=HttpConnection, exchange=Exchange, head=RequestHead, keep_alive=bint,
                   data=bytes)
    cpdef _refuse(self, int status, str why)

cpdef str _client_address(HttpConnection conn, Exchange exchange)
cpdef str _scheme(HttpConnection conn, Exchange exchange)

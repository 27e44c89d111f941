# Types of connection.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport Parser, RequestHead, RequestSink
from corral.http.response cimport ResponseHead, build_head, redirection
from corral.server cimport clock
from corral.server.bodyclock cimport BodyClock
from corral.server.exchange cimport Exchange

cdef class HttpConnection

cdef class Adapter:
    cpdef make_body(self, HttpConnection conn, Exchange exchange)
    cpdef run(self, HttpConnection conn, Exchange exchange)
    cpdef client_gone(self, HttpConnection conn)

cdef class ServerState:
    cdef public Adapter adapter
    cdef public object empty_body
    cdef public object limits
    cdef public double keep_alive
    cdef public double header_timeout
    cdef public double body_timeout
    cdef public double body_min_rate
    cdef public double body_min_rate_grace
    cdef public double send_timeout
    cdef public object on_finish
    cdef public object connections  # a set, or acceptor.WatchedConnections (its own add)
    cdef public str prefix
    cdef public bint draining
    cdef public Py_ssize_t served
    cdef public Py_ssize_t accepted
    cdef public Py_ssize_t closed
    cdef public Py_ssize_t retire_after
    cdef public Py_ssize_t max_connections
    cdef public object on_retire
    cdef public object on_client_gone
    cdef public object loop


cdef class HttpConnection(RequestSink):
    cdef public ServerState server
    cdef public object loop
    cdef public object plan
    cdef public object steps
    cdef public Py_ssize_t steps_least
    cdef public object sockname
    cdef public object transport
    cdef public bint encrypted
    cdef public object given_client
    # the filters, untyped: a listener without them never imports them (filters/*.py)
    cdef public object gate
    cdef public object route
    cdef public Parser parser
    cdef public object reader
    cdef public bint trusted
    cdef public object limiter
    cdef public object conns
    cdef public object probes
    cdef public tuple conns_held
    cdef public list pipeline
    cdef public Exchange active
    cdef public Exchange receiving
    cdef public int state
    cdef public double deadline
    cdef public BodyClock body_clock
    cdef public bint closed
    cdef public bint write_paused
    cdef public double waiting_since
    cdef public bint reading_paused
    cdef public object sendfile_job
    cdef public object on_writable
    cdef public object adapter_state
    cdef public bint _dispatching
    cdef public object _pending_error
    cdef public object peer

    @cython.locals(server=ServerState, action=object, has_body=bint)
    cpdef Exchange _enqueue(self, Exchange exchange)
    @cython.locals(exchange=Exchange, server=ServerState)
    cpdef _dispatch(self)
    @cython.locals(exchange=Exchange)
    cpdef on_request(self, RequestHead head)
    cpdef on_body(self, chunk)
    @cython.locals(server=ServerState)
    cpdef _body_start(self, Exchange exchange)
    cpdef on_request_end(self)
    cpdef write(self, data)
    cpdef bytes begin(self, Exchange exchange, object status, object headers,
                      object body_length)
    cpdef bytes whole(self, Exchange exchange, object status, object headers, bytes data)
    cdef inline bint _stepped(self, object status, Py_ssize_t body_length)
    @cython.locals(server=ServerState, head=ResponseHead, request=RequestHead)
    cpdef bytes _head(self, Exchange exchange, object status, object headers,
                      object body_length)
    @cython.locals(exchange=Exchange)
    cpdef send_wait(self, bint waiting)
    @cython.locals(server=ServerState, served=Py_ssize_t, body=object)
    cpdef finish(self, Exchange exchange, bint keep_alive, bytes last=*)
    cpdef pause_reading(self)
    cpdef _resume_reading(self)
    cpdef close(self, bint abort=*)

# Types of upstreams.py when compiled (setup.py's TWINS; the .py is the Python core): an
# upstream's servers and connections, their fields in C. (ResponseParser, ProxyCall: objects.)

cimport cython

from corral.server cimport clock


@cython.final
cdef class UpstreamServer:
    cdef public str name
    cdef public int family
    cdef public object address
    cdef public int protocol
    cdef public double weight
    cdef public double current
    cdef public double failed_until
    cdef public double failed_at
    cdef public list idle
    cdef public int max_conns
    cdef public int open
    cdef public object waiting

    @cython.locals(now=double)
    cpdef failed(self, object options)
    @cython.locals(idle=list, kept=UpstreamConnection, now=double)
    cpdef UpstreamConnection take_idle(self, object options)
    cpdef keep(self, UpstreamConnection kept, object options)
    cpdef connect(self, object loop, object options, object then)
    cpdef closed_one(self, object loop)
    cpdef _free_place(self)


@cython.final
cdef class Upstream:
    cdef public str name
    cdef public object options
    cdef public list servers
    cdef public double total

    @cython.locals(now=double, best=UpstreamServer, oldest=UpstreamServer, server=UpstreamServer,
                   total=double)
    cpdef UpstreamServer choose(self, list tried)


@cython.final
cdef class UpstreamConnection:
    cdef public object call
    cdef public bint closed
    cdef public bint counted
    cdef public double idle_since
    cdef public object loop
    cdef public object making
    cdef public object parser
    cdef public UpstreamServer server
    cdef public object sock
    cdef public object then
    cdef public object timer
    cdef public object transport
    cdef public bint write_paused

    @cython.locals(server=UpstreamServer, error=int)
    cpdef dial(self, object loop, double timeout, object then)
    cpdef close(self, bint abort=*)
    cpdef uncount(self)

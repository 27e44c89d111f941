# Types of fastcgi.py when compiled (setup.py's TWINS; the .py is the Python core): the
# FastCgiReply of every php request, its fields in C, its connection, pool and head reader
# typed (corral.fastcgi's extension types).

cimport cython

from corral.fastcgi.answer cimport CgiHead, HeadReader
from corral.fastcgi.client cimport Backend, FastCgiPool
from corral.http.head cimport RequestHead
from corral.php.apps cimport PhpApplication
from corral.php.site cimport Choice, Site
from corral.routing.request cimport RouteRequest
from corral.server cimport clock
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef dict _status_texts

@cython.locals(text=str)
cpdef str _status_text(int status)
@cython.locals(request=RouteRequest, site=Site, choice=Choice)
cpdef bint to_php(HttpConnection conn, Exchange exchange, PhpApplication app, Py_ssize_t target) except -1
@cython.locals(php=PhpApplication)
cpdef bint to_fpm(HttpConnection conn, Exchange exchange, str name, str address, object _) except -1


@cython.final
cdef class FastCgiReply:
    cdef public PhpApplication app
    cdef public Site site
    cdef public Choice choice
    cdef public object host
    cdef public HttpConnection conn
    cdef public Exchange exchange
    cdef public Backend backend
    cdef public FastCgiPool pool
    cdef public object connecting
    cdef public list pending
    cdef public Py_ssize_t pending_size
    cdef public object sent
    cdef public Py_ssize_t sent_size
    cdef public bint retried
    cdef public bint check_kept
    cdef public object spool
    cdef public Py_ssize_t body_size
    cdef public bint body_done
    cdef public bint stdin_done
    cdef public HeadReader head
    cdef public bint heard
    cdef public bint answered
    cdef public bint over
    cdef public double deadline
    cdef public double sent_at
    cdef public bint watched
    cdef public bint client_paused
    cdef public list out

    @cython.locals(conn=HttpConnection, exchange=Exchange, length=Py_ssize_t, encoded=bytes,
                   paused=bint)
    cpdef connected(self, Backend backend)
    @cython.locals(head=RequestHead)
    cpdef start(self, HttpConnection conn, Exchange exchange)
    cpdef _wait(self)
    @cython.locals(kind=int)
    cpdef records(self, list events)
    @cython.locals(backend=Backend)
    cpdef _flush(self, bytes first=*)
    @cython.locals(head=HeadReader, got=tuple, cgi=CgiHead)
    cpdef _stdout(self, bytes data)
    @cython.locals(out=list)
    cpdef _write_out(self)
    @cython.locals(backend=Backend, pool=FastCgiPool)
    cpdef _ended(self)

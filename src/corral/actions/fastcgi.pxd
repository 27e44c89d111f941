# Types of fastcgi.py when compiled (setup.py's TWINS; the .py is the Python core): the
# FastCgiReply of every php request, its fields in C, its connection, pool and head reader
# typed (corral.fastcgi's extension types).

cimport cython

from corral.fastcgi.answer cimport CgiHead, HeadReader
from corral.fastcgi.client cimport Backend, FastCgiPool


@cython.final
cdef class FastCgiReply:
    cdef public object app
    cdef public object site
    cdef public object choice
    cdef public object host
    cdef public object conn
    cdef public object exchange
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

    cpdef connected(self, Backend backend)
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

# Types of files.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.routing.request cimport RouteRequest
from corral.static.answer cimport StaticAnswer

cdef class _Representation:
    cdef public bytes path
    cdef public object coding
    cdef public tuple identity
    cdef public long long size
    cdef public long long mtime
    cdef public bytes etag
    cdef public bytes last_modified
    cdef public object body
    cdef public list fields
    cdef public dict answers

cdef class _Entry:
    cdef public int kind
    cdef public double deadline
    cdef public str mime
    cdef public int status
    cdef public bint hashed
    cdef public _Representation identity
    cdef public dict representations
    cdef public object offers
    cdef public Py_ssize_t memory
    cdef public object chroot
    cdef public int resolve

cdef class StaticFiles:
    cdef public object mime
    cdef public double valid
    cdef public Py_ssize_t entries
    cdef public Py_ssize_t memory_file
    cdef public Py_ssize_t memory
    cdef public object openat2
    cdef public dict _plain
    cdef public dict _restricted
    cdef public Py_ssize_t _count
    cdef public Py_ssize_t _held

    @cython.locals(now=double, resolve=int, plain=bint, table=dict, status=int, path=str,
                   index=bint, entry=_Entry, kind=int, answer=StaticAnswer)
    cpdef StaticAnswer serve(self, object share, RouteRequest request, bint retry=*)
    @cython.locals(fields=dict, codes=dict, lengths=frozenset, code=object, name=bytes,
                   value=bytes, rep=_Representation,
                   head=bint, built=tuple, stamp=long, answer=StaticAnswer, fd=int)
    cpdef StaticAnswer _answer(self, _Entry entry, object share, RouteRequest request,
                               str method)
    @cython.locals(value=object, date=object)
    cpdef StaticAnswer _conditional(self, dict fields, _Entry entry, _Representation rep,
                                    object plan, tuple built, bint head)

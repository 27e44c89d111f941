# Types of request.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef class RouteRequest:
    cdef public str method
    cdef public bytes target
    cdef public object headers
    cdef public object peer
    cdef public object local
    cdef public str scheme
    cdef public object absolute
    cdef public str _path
    cdef public str _query
    cdef public str _decoded_query
    cdef public str _host
    cdef public dict _fields
    cdef public dict _args
    cdef public dict _cookies
    cdef public tuple _src
    cdef public tuple _dst

    @cython.locals(raw=str, path=str, query=str)
    cpdef str _load_path(self)
    cpdef str _load_query(self)
    @cython.locals(raw=object)
    cpdef str _load_host(self)
    cpdef str path(self)
    cpdef str query(self)
    cpdef str host(self)


cdef list _last_host

@cython.locals(last=list, found=str)
cpdef str _normalize_host(raw)
@cython.locals(host=bytes, end=Py_ssize_t)
cpdef str _normalized_host(bytes raw)

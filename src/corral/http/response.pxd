# Types of response.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef class ResponseHead:
    cdef public bytes data
    cdef public int status
    cdef public bint bodiless
    cdef public object content_length
    cdef public bint chunked
    cdef public bint close

cdef class _LastHead:
    cdef public object status
    cdef public tuple fields
    cdef public str prefix
    cdef public bint chunked
    cdef public bint keep_alive
    cdef public str version
    cdef public object body_length
    cdef public ResponseHead head

@cython.locals(index=Py_ssize_t, field=object, header=object)
cpdef bint _same_fields(tuple fields, list headers) except -1

@cython.locals(key=tuple, head=ResponseHead, last=_LastHead)
cpdef ResponseHead build_head(object status, object headers, str prefix, bint chunked,
                              bint keep_alive, str version, object body_length=*)

@cython.locals(parts=list, fields=dict, entry=tuple, kind=int, code=int, close=bint,
               line=str, length_line=str, given=int)
cpdef ResponseHead make_head(object status, object headers, str prefix, bint chunked,
                             bint keep_alive, str version, object body_length=*)

@cython.locals(text=str)
cpdef bint redirection(object status)

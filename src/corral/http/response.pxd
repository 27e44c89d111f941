# Types of response.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cdef class ResponseHead:
    cdef public bytes data
    cdef public int status
    cdef public object content_length
    cdef public bint chunked
    cdef public bint close

@cython.locals(key=tuple, head=ResponseHead)
cpdef ResponseHead build_head(object status, object headers, str prefix, bint chunked,
                              bint keep_alive, str version, object body_length=*)

@cython.locals(parts=list, fields=dict, entry=tuple, kind=int, code=int, close=bint,
               line=str, length_line=str)
cpdef ResponseHead make_head(object status, object headers, str prefix, bint chunked,
                             bint keep_alive, str version, object body_length=*)

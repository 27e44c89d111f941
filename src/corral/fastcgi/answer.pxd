# Types of answer.py when compiled (setup.py's TWINS; the .py is the Python core): a php
# request's CGI head, read and parsed, its objects' fields in C.

cimport cython

cdef int _CR, _LF


@cython.final
cdef class CgiHead:
    cdef public int status
    cdef public list fields


@cython.final
cdef class HeadReader:
    cdef public bytes buffer
    cdef public Py_ssize_t limit

    @cython.locals(buffer=bytes, end=Py_ssize_t, skip=Py_ssize_t)
    cpdef feed(self, data)
    cpdef finish(self)


@cython.locals(size=Py_ssize_t, at=Py_ssize_t, after=Py_ssize_t, end=Py_ssize_t,
               start=Py_ssize_t)
cdef (Py_ssize_t, Py_ssize_t) _head_end(bytes buffer)

@cython.locals(known=tuple)
cpdef CgiHead parsed_head(bytes data)

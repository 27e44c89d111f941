# Types of answer.py when compiled (setup.py's TWINS); the .py is the Python core.

cdef class StaticAnswer:
    cdef public int status
    cdef public list fields
    cdef public bytes body
    cdef public int fd
    cdef public Py_ssize_t offset
    cdef public Py_ssize_t count
    cdef public Py_ssize_t length
    cdef public bint fallback
    cdef public tuple wire

    cpdef close(self)

# Types of body.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

cpdef release(object waiter)

cdef class _EmptyBody:
    pass

cdef class AsgiBody:
    cdef public list chunks
    cdef public Py_ssize_t size
    cdef public bint done
    cdef public bint failed
    cdef public bint given
    cdef public bint over
    cdef public object waiter

    cpdef bint feed(self, bytes chunk)
    cpdef finish(self)
    cpdef fail(self)
    cpdef close(self)
    @cython.locals(waiter=object)
    cpdef wake(self)
    @cython.locals(chunks=list)
    cpdef bytes take(self)

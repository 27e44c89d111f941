# Types of site.py when compiled (setup.py's TWINS; the .py is the Python core): which script
# a php request runs, asked by every php request (its kept choice, a dictionary's lookup).

cimport cython

from corral.server cimport clock

cdef dict _REFUSED


@cython.final
cdef class Choice:
    cdef public bytes script_name
    cdef public bytes filename
    cdef public str path_info
    cdef public int status
    cdef public object location
    cdef public object encoded


@cython.final
cdef class Site:
    cdef public str root
    cdef public object script
    cdef public bytes index
    cdef public bytes raw_root
    cdef public double valid
    cdef public dict cache

    @cython.locals(now=double, kept=tuple, choice=Choice)
    cpdef Choice choose(self, str path, str query=*)
    @cython.locals(raw=bytes, at=Py_ssize_t, kind=int)
    cpdef Choice _choose(self, str path)
    @cython.locals(kind=int)
    cpdef Choice _checked(self, bytes script_name, str path_info)
    cpdef int _kind(self, bytes path) except? -1


cpdef bytes _raw(str path)

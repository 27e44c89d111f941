# Types of apps.py when compiled (setup.py's TWINS; the .py is the Python core): a php
# application as a worker reaches it, asked for its address and its pool by every php request.

cimport cython

from corral.fastcgi.client cimport FastCgiPool


@cython.final
cdef class PhpApplication:
    cdef public str name
    cdef public tuple sites
    cdef public object address
    cdef public Py_ssize_t limit
    cdef public bint keep
    cdef public bint recycled
    cdef public double connect_timeout
    cdef public double read_timeout
    cdef public Py_ssize_t head_limit
    cdef public FastCgiPool pool
    cdef public dict _at

    @cython.locals(found=PhpApplication)
    cpdef PhpApplication at(self, str address)
    @cython.locals(pool=FastCgiPool)
    cpdef FastCgiPool connections(self, loop)
    @cython.locals(one=PhpApplication)
    cpdef drain(self)
    @cython.locals(one=PhpApplication)
    cpdef close(self)

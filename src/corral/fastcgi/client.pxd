# Types of client.py when compiled (setup.py's TWINS; the .py is the Python core): a php
# request's connection to php-fpm and the worker's pool of them, their fields in C.

cimport cython

from corral.fastcgi.records cimport RecordReader


@cython.final
cdef class Backend:
    cdef public FastCgiPool pool
    cdef public object transport
    cdef public RecordReader reader
    cdef public object user
    cdef public bint closed
    cdef public bint write_paused
    cdef public bint reused
    cdef public object peek

    @cython.locals(events=list)
    cpdef data_received(self, data)
    cpdef write(self, data)
    cpdef close(self)
    cpdef bint gone(self)


@cython.final
cdef class FastCgiPool:
    cdef public object loop
    cdef public str address
    cdef public Py_ssize_t limit
    cdef public bint keep
    cdef public bint recycled
    cdef public double connect_timeout
    cdef public list idle
    cdef public set all
    cdef public Py_ssize_t connecting
    cdef public object waiting
    cdef public double sweep
    cdef public set watched
    cdef public object sweeping

    @cython.locals(backend=Backend)
    cpdef get(self, user)
    cpdef watch(self, user)
    cpdef unwatch(self, user)
    cpdef put(self, Backend backend)
    cpdef forget(self, Backend backend)

# Types of exchange.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport RequestHead
from corral.server cimport clock

cdef class Exchange:
    cdef public RequestHead head
    cdef public double request_start
    cdef public double client_time
    cdef public object body
    cdef public bint complete
    cdef public bint started
    cdef public bint streaming
    cdef public bint continue_sent
    cdef public object action
    cdef public Py_ssize_t target
    cdef public object forwarded
    cdef public int status
    cdef public Py_ssize_t response_bytes
    cdef public object response_headers
    cdef public bint keep_alive
    cdef public bint discard
    cdef public bint head_sent
    cdef public bint chunked
    cdef public bint ended
    cdef public object remaining
    cdef public object encoder
    cdef public bint copies_files
    cdef public double not_before
    cdef public object refusal

    @cython.locals(at=double, now=double)
    cpdef bint due(self, object loop, object then) except -1
    cpdef bytes frame(self, bytes data)
    cpdef bytes _framed(self, bytes data)
    cpdef bytes end(self, str trailer_lines=*, bint more=*)
    cpdef tuple frame_file(self, Py_ssize_t count)
    cpdef bytes file_sent(self, Py_ssize_t count)

# Types of head.py when compiled (setup.py's TWINS); the .py is the Python core.

cdef class Limits:
    cdef public Py_ssize_t request_line
    cdef public Py_ssize_t fields
    cdef public Py_ssize_t field_size
    cdef public Py_ssize_t body
    cdef public Py_ssize_t head

cdef class RequestHead

cdef class RequestSink:
    cpdef on_request(self, RequestHead head)
    cpdef on_body(self, chunk)
    cpdef on_request_end(self)

cdef class Parser:
    cdef public bint ended
    cdef public Py_ssize_t head_bytes
    cdef public object upgraded

    cpdef feed(self, data)
    cpdef detach(self)

cdef class RequestHead:
    cdef public str method
    cdef public bytes target
    cdef public str version
    cdef public object headers
    cdef public bint keep_alive
    cdef public object content_length
    cdef public bint chunked
    cdef public bint expect_continue
    cdef public object absolute

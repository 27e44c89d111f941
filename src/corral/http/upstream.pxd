# Types of upstream.py when compiled (setup.py's TWINS); the .py is the Python core: every
# proxied answer runs through it. The sink stays `object` (the proxy's connection, typed in
# its own module).

cimport cython

cdef int _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE
cdef bytes _last_raw
cdef _Parsed _last_parsed

cdef class ResponseHead:
    cdef public int status
    cdef public bytes reason
    cdef public str version
    cdef public list headers
    cdef public tuple fields
    cdef public bint keep_alive
    cdef public object content_length
    cdef public bint chunked

cdef class _Parsed:
    cdef public int status
    cdef public bytes reason
    cdef public str version
    cdef public tuple fields
    cdef public object length
    cdef public bint te
    cdef public bint chunked
    cdef public bint close
    cdef public bint keep_alive_option

    @cython.locals(head=ResponseHead, close=bint)
    cdef ResponseHead head(self, bint bodiless)

cdef class ResponseParser:
    cdef object _sink
    cdef Py_ssize_t _head_limit
    cdef Py_ssize_t _fields
    cdef bytes _partial
    cdef int _state
    cdef unsigned long long _remaining
    cdef Py_ssize_t _trailers
    cdef public bint head_method
    cdef public Py_ssize_t received
    cdef public object upgraded

    cpdef expect(self, bint head_method)
    @cython.locals(pos=Py_ssize_t, end=Py_ssize_t, state=int, take=Py_ssize_t,
                   line_end=Py_ssize_t, eol=Py_ssize_t, line=bytes, have=bytes)
    cpdef feed(self, bytes data)
    @cython.locals(state=int)
    cpdef feed_eof(self)
    @cython.locals(stop=Py_ssize_t, raw=bytes, parsed=_Parsed, status=int, bodiless=bint)
    cdef Py_ssize_t _head(self, bytes data, Py_ssize_t pos) except -1
    @cython.locals(size=cython.ulonglong, at=Py_ssize_t, most=Py_ssize_t, byte=int)
    cdef Py_ssize_t _plain_chunk_size(self, bytes data, Py_ssize_t pos, Py_ssize_t end) except -2
    cdef _chunk_size(self, bytes line)
    cdef _sized(self, unsigned long long size)
    cdef _trailer(self, bytes line)
    cdef _end(self)

# Types of proxy_head.py when compiled (setup.py's TWINS; the .py is the Python core): the head
# of every proxied request and the fields of every answer.

cimport cython

cdef int _FORWARD, _DROP, _HOST, _FORWARDED_FOR, _VIA, _FORWARDED
cdef dict _KIND_OF_LOWER, _kinds, _answers
cdef Py_ssize_t _KINDS_KEPT, _ANSWERS_KEPT, _ANSWER_SIZE
cdef bytes _VIA_LINE
cdef frozenset _HOP_BY_HOP

@cython.locals(kind=object)
cdef int _kind(bytes name) except -1

@cython.locals(named=set, name=bytes, value=bytes, option=bytes)
cpdef set _named_by_connection(object headers)

@cython.locals(target=bytes, headers=object, named=set, lines=list, host=bytes,
               forwarded_for=bytes, via=bytes, forwarded=bytes, name=bytes, value=bytes,
               kind=int, address=bytes, proto=bytes)
cpdef bytes request_head(object head, str client, str scheme, object upgrade, bint chunked)

@cython.locals(named=set, fields=list, via=str, name=bytes, value=bytes, lower=bytes)
cpdef list answer_fields(object headers)

@cython.locals(fields=tuple, key=tuple, known=tuple)
cpdef tuple answer_of(int status, object reason, object headers)

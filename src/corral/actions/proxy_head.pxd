# Types of proxy_head.py when compiled (setup.py's TWINS; the .py is the Python core): the head
# of every proxied request and the fields of every answer.

cimport cython

from corral.http.head cimport RequestHead

cdef int _FORWARD, _DROP, _HOST, _FORWARDED_FOR, _VIA, _FORWARDED
cdef dict _KIND_OF_LOWER, _kinds, _openings, _added_lines, _answers
cdef Py_ssize_t _KINDS_KEPT, _OPENINGS_KEPT, _ADDED_KEPT, _ANSWERS_KEPT, _ANSWER_SIZE
cdef frozenset _HOP_BY_HOP, _BODY_EXPECTED
cdef int _last_status
cdef object _last_reason
cdef tuple _last_fields
cdef tuple _last_answer

@cython.locals(kind=object)
cdef int _kind(bytes name) except -1

@cython.locals(named=set, name=bytes, value=bytes, option=bytes)
cpdef set _named_by_connection(object headers)

@cython.locals(target=bytes, method=str, opening=bytes, headers=object, named=set, lines=list,
               host=bytes, forwarded_for=bytes, via=bytes, forwarded=bytes, name=bytes,
               value=bytes, kind=int, key=tuple, added=bytes)
cpdef bytes request_head(RequestHead head, str client, str scheme, object upgrade, bint chunked)

@cython.locals(address=bytes, proto=bytes, lines=list)
cdef bytes _added(str client, str scheme, bytes host, bytes forwarded_for, bytes via,
                  bytes forwarded)

@cython.locals(named=set, fields=list, via=str, name=bytes, value=bytes, lower=bytes)
cpdef list answer_fields(object headers)

@cython.locals(fields=tuple, key=tuple, known=tuple, kept=tuple, fields_given=list)
cpdef tuple answer_of(int status, object reason, object headers)


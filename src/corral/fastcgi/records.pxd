# records.py is compiled as it is (setup.py's TWINS; the .py is the Python core): a php
# request's records, written and read; the pairs' encoding typed (every request's variables).

cimport cython

cdef list _SHORT_LENGTHS

@cython.locals(out=list)
cpdef bytes encode_pairs(pairs)
@cython.locals(name_length=Py_ssize_t, value_length=Py_ssize_t)
cpdef void append_pair(list out, bytes name, bytes value)


@cython.final
cdef class RecordReader:
    cdef public bytes buffer
    cdef public bint ended

    @cython.locals(buffer=bytes, events=list, at=Py_ssize_t, size=Py_ssize_t, version=int,
                   kind=int, request_id=int, length=Py_ssize_t, padding=Py_ssize_t,
                   end=Py_ssize_t, content=bytes, protocol_status=int)
    cpdef list feed(self, data)
    cpdef reset(self)


@cython.locals(length=Py_ssize_t, padding=Py_ssize_t)
cpdef bytes _record(int kind, bytes content, bytes end=*)
cpdef bytes params_of(bytes encoded)

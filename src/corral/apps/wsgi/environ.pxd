# Types of environ.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport RequestHead

@cython.locals(environ=dict, target=bytes, keys=dict, headers=list, name=bytes, value=bytes,
               text=str, before=object, size=Py_ssize_t)
cpdef dict request_environ(dict base, RequestHead head, object body)

@cython.locals(target=bytes, raw=str, path=str, query=str, mark=Py_ssize_t, method=str,
               version=str)
cdef int _request_part(dict environ, RequestHead head, object body) except -1

cdef class ConnectionEnviron:
    cdef public dict base
    cdef public list fields
    cdef public dict template
    cdef public bint uwsgi

    @cython.locals(fields=list, last=list, alike=bint, template=dict, environ=dict)
    cpdef dict request(self, RequestHead head, object body, object forwarded)

@cython.locals(index=Py_ssize_t)
cdef bint _same_objects(list these, list those)

# Types of environ.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport RequestHead

@cython.locals(environ=dict, target=bytes, raw=str, path=str, query=str, keys=dict,
               headers=list, name=bytes, value=bytes, mark=Py_ssize_t, method=str,
               version=str, text=str, before=object, size=Py_ssize_t)
cpdef dict request_environ(dict base, RequestHead head, object body)

# Types of scope.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.http.head cimport RequestHead

cpdef bytes _lowered(bytes name)
cpdef tuple split_target(bytes target, object absolute=*)
cpdef str decode_path(bytes raw_path)
@cython.locals(headers=list, extensions=dict, scope=dict, lowered=dict, lower=bytes,
               name=bytes, value=bytes, offered=dict, versions=dict, connection=object)
cpdef dict request_scope(dict base, RequestHead head, str root_path, dict state,
                         object forwarded=*)

# params.py is compiled as it is (setup.py's TWINS; the .py is the Python core): a php request's
# variables are encoded as they are found, through records' typed append_pair (a C call).

cimport cython
from corral.fastcgi.records cimport append_pair
from corral.http.head cimport RequestHead

cdef dict _keys
cdef dict _locals
cdef dict _PROTOCOLS
cdef dict _SCHEMES
cdef dict _METHODS
cdef list _last_peer

cpdef object _key(bytes name)
cpdef tuple _remote(peer)
cpdef tuple _local(address)
cpdef bytes _method(str method)

@cython.locals(out=list)
cpdef bytes encoded_params(
    RequestHead head, choice, bytes document_root, peer, local, str scheme, content_length,
    str host, forwarded=*
)

@cython.locals(fields=dict, target=bytes, version=str, remote_addr=bytes, remote_port=bytes,
               server_addr=bytes, server_port=bytes, key=object, name=bytes, value=bytes,
               content_type=object)
cdef void _add_request_params(
    list out, RequestHead head, peer, local, str scheme, content_length, str host, forwarded
)

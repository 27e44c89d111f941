# params.py is compiled as it is (setup.py's TWINS; the .py is the Python core): a php request's
# variables are encoded as they are found, through records' typed append_pair (a C call).

cimport cython
from corral.fastcgi.records cimport append_pair

cpdef bytes encoded_params(
    head, choice, bytes document_root, peer, local, scheme, content_length, host, forwarded=*
)

@cython.locals(fields=dict)
cdef void _add_request_params(
    bytearray out, head, peer, local, scheme, content_length, host, forwarded
)

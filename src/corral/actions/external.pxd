# Types of external.py when compiled (setup.py's TWINS; the .py is the Python core): every
# request routed to an external or php application passes here (its address, its speaker).

from corral.actions.proxy cimport forward
from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cdef dict _ROUTES

cpdef bint _http(conn, exchange, str name, str address, object options) except -1
cpdef bint to_external(HttpConnection conn, Exchange exchange, str name) except -1

# Types of application.py when compiled (setup.py's TWINS; the .py is the Python core): every
# request passed to an application passes here (HandOff stays a Python class).

from corral.server.connection cimport HttpConnection
from corral.server.exchange cimport Exchange

cpdef bint to_application(HttpConnection conn, Exchange exchange, object action) except -1

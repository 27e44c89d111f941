# Types of router.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.routing.request cimport RouteRequest

@cython.locals(hops=int, tests=tuple, step_kind=int)
cpdef object _follow(int kind, object payload, RouteRequest r)

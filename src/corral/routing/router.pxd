# Types of router.py when compiled (setup.py's TWINS); the .py is the Python core.

cimport cython

from corral.routing.request cimport RouteRequest

cdef class Route:
    cdef public str label
    cdef public list steps
    cdef public dict by_target

cdef class Router:
    cdef public dict _routes
    cdef public object _compile_pass
    cdef public dict _entries
    cdef public object reached
    cdef public bint reads_destination
    cdef public set kinds

    @cython.locals(entry=tuple, kind=int, route=Route, kept=dict, key=tuple)
    cpdef object resolve(self, str pass_target, RouteRequest request)
    cpdef object resolve_fallback(self, object share, RouteRequest request)

@cython.locals(hops=int, tests=tuple, step_kind=int)
cpdef object _follow(int kind, object payload, RouteRequest r)

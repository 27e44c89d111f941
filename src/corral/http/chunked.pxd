# Types of chunked.py when compiled (setup.py's TWINS); the .py is the Python core.

cpdef bytes chunk(bytes data)
cpdef bytes size_line(Py_ssize_t count)
cpdef bytes last(str trailer_lines, bint first, bint more)

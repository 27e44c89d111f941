# records.py is compiled as it is (setup.py's TWINS; the .py is the Python core): a php
# request's records, written and read; the pairs' encoding typed (every request's variables).

cimport cython

@cython.locals(out=bytearray, name_length=Py_ssize_t, value_length=Py_ssize_t)
cpdef bytes encode_pairs(pairs)

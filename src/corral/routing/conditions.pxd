# conditions.py is compiled as it is (setup.py's TWINS; the .py is the Python core): what runs per
# request are the closures it makes once per configuration, which Cython compiles, untyped.

# upstream.py is compiled as it is (setup.py's TWINS; the .py is the Python core): every proxied
# request runs through it, untyped.

# answer.py is compiled as it is (setup.py's TWINS; the .py is the Python core): a php request's
# FastCGI exchange runs through it, untyped.

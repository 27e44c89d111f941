"""corral: a Python application server."""

__version__ = "0.1.0"

"""corral: a Python application server."""

__version__ = "0.1.0"

# chooses the request core (compiled or Python) before any of its modules is imported
from corral import core as _core  # noqa: F401

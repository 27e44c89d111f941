"""An application module that raises while it is imported."""

raise RuntimeError("proc_import_fail: boom at import time")

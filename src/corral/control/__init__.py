"""The control API: the running server reconfigured through HTTP and JSON, as NGINX Unit's.

The master's own loop serves it (`server.py`); workers never import this package. A change
goes: request → path operation on the JSON form of the running document (`tree.py`) → whole-
document validation (`corral.config.validate_document`) → `Reloads.apply`, which answers once
the new generation is committed or rolled back → saved to the state directory (`state.py`)
when the state directory owns the configuration. `ctl.py` is the `corral ctl` client.
"""

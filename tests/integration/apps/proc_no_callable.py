"""An importable module with neither ``application`` nor ``app``."""

something_else = 42

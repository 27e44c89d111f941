"""An importable module with neither ``application`` nor ``app``."""

something_else = 42


def make_nothing():
    """A factory whose result is not an application."""
    return 42

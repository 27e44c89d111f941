"""Logs: the error log and the access log."""

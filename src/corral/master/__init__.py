"""The master: owns the configuration, the listeners and the worker processes."""

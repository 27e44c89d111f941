"""An application module whose own import of a module fails: a dependency not installed."""

import corral_test_dependency_not_installed  # noqa: F401

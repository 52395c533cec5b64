"""The package version, kept in one place (pyproject reads it from here)."""

__version__ = "0.1.0"

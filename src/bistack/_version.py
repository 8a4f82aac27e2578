"""The version of bistack, in one place (the package metadata reads it too)."""

__version__ = "0.1.0"

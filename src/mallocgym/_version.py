"""The package version, here so that any module can read it without importing the package's public face."""

__version__ = "0.1.0"

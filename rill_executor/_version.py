"""The installed release, as its package metadata says: ``pyproject.toml`` is the one place
the version is written."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rill-executor")
except PackageNotFoundError:  # pragma: no cover  # a source tree that was never installed
    __version__ = "0+unknown"

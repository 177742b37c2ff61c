"""The ``rill-executor`` command (extra ``cli``): one module per command group.

``_main`` holds the group and its one error exit (``ExitCode``), ``_options`` the options
every command shares, ``_output`` the human and JSON renderings.
"""

from __future__ import annotations

import sys

try:
    import click  # noqa: F401
    import rich  # noqa: F401
except ImportError:  # pragma: no cover - exercised only without the extra
    sys.exit("the rill-executor command needs the 'cli' extra: pip install 'rill-executor[cli]'")

from ._exit import ExitCode
from ._main import main

__all__ = ["ExitCode", "main"]

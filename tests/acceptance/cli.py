"""Running the installed ``rill-executor`` command, as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXE = Path(sys.executable).parent / "rill-executor"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command with ``args``; no ``RILL_*`` variable of the test run leaks into it."""
    assert EXE.exists(), f"{EXE} is missing: install rill-executor[cli] in this environment"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    return subprocess.run(
        [EXE, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean | (env or {}),
    )


def opts(store_url: str, namespace: str) -> tuple[str, ...]:
    return ("--store", store_url, "--namespace", namespace)

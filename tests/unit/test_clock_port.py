"""Time reaches the core and the Rill Flow executor only through the ``Clock`` port
(invariant 22): no module of theirs reads the ``time`` module, ``datetime.now()``, or an
event loop's clock, nor waits on asyncio's own timers, but the few named below, each with
its reason. A new reading of the process's clock would escape a test's ``VirtualClock``:
a test of it would have to sleep.

The operations CLI (``rill_executor/cli``) and the test kit (``rill_executor/testing``)
are not scanned: the CLI paces an operator's command on the process's clock, and the kit
brings the virtual clock and the real-time timers tests choose between.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TypeGuard

from tests.clocks import RECHECK

PACKAGE = Path(__file__).resolve().parents[2] / "rill_executor"
NOT_SCANNED = ("cli", "testing")

PORT = "the port itself: SystemClock is the process's clock"
ALLOWED = {
    ("_clock.py", "import time"): PORT,
    ("_clock.py", "asyncio.sleep"): PORT,
    ("_clock.py", "loop.call_at"): PORT,
    ("_clock.py", "loop.time"): PORT,
    ("_telemetry.py", "import time"): (
        "the metrics' durations (perf_counter): measured and reported, never decided on"
    ),
    ("_recheck.py", "import time"): RECHECK,
}
"""(module, what it reads) -> why it may: a module path relative to ``rill_executor``."""

_NOW = {"now", "utcnow", "today"}
_ASYNCIO_WAITS = {"sleep", "wait_for", "timeout", "timeout_at"}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _yields(node: ast.AST) -> TypeGuard[ast.Call]:
    """``asyncio.sleep(0)``: a yield to the event loop, which waits for no time."""
    return (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 0
    )


def _loop_time(node: ast.AST) -> TypeGuard[ast.Call]:
    """``loop.time()``: an event loop's own clock."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "time"
        and not node.args
        and _name(node.func.value) != "time"
    )


def clock_reads(source: str) -> list[tuple[str, int]]:
    """What ``source`` reads of the process's clock or waits on, and where: (what, line).
    A function is found named, called or not (``staticmethod(asyncio.sleep)``)."""
    tree = ast.parse(source)
    yields = {id(node.func) for node in ast.walk(tree) if _yields(node)}
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [("import time", node.lineno) for a in node.names if a.name == "time"]
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            found.append(("import time", node.lineno))
        elif isinstance(node, ast.Attribute):
            attr, owner = node.attr, _name(node.value)
            if attr in _NOW and owner in {"datetime", "date"}:
                found.append((f"{owner}.{attr}", node.lineno))
            elif attr in _ASYNCIO_WAITS and owner == "asyncio" and id(node) not in yields:
                found.append((f"asyncio.{attr}", node.lineno))
            elif attr in {"call_at", "call_later"}:
                found.append((f"loop.{attr}", node.lineno))
        elif _loop_time(node):
            found.append(("loop.time", node.lineno))
    return sorted(found, key=lambda item: item[1])


def _scanned() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in NOT_SCANNED
    ]


def test_the_core_and_the_executor_read_time_only_through_the_clock() -> None:
    seen: set[tuple[str, str]] = set()
    unexplained: list[str] = []
    for path in _scanned():
        module = path.relative_to(PACKAGE).as_posix()
        for what, line in clock_reads(path.read_text()):
            seen.add((module, what))
            if (module, what) not in ALLOWED:
                unexplained.append(f"rill_executor/{module}:{line}: {what}")
    assert not unexplained, (
        "read the time through the ledger's Clock (ledger.clock: monotonic_ns, time_ns,"
        " asleep, loop_call_at), or add the reading to ALLOWED with its reason:\n"
        + "\n".join(unexplained)
    )
    assert set(ALLOWED) <= seen, f"allowed but no longer read: {sorted(set(ALLOWED) - seen)}"
    assert any(p.parts[-2] == "rillflow" for p in _scanned())  # the executor is scanned


def test_the_scan_finds_each_kind_of_reading() -> None:
    source = """
import time
from time import monotonic
import asyncio
from datetime import UTC, date, datetime
datetime.now(UTC)
date.today()
asyncio.sleep(0)
asyncio.sleep(1.5)
asyncio.wait_for(x, 1)
loop.call_later(1, f)
loop.time()
clock.time_ns()
asleep = staticmethod(asyncio.sleep)
"""
    assert clock_reads(source) == [
        ("import time", 2),
        ("import time", 3),
        ("datetime.now", 6),
        ("date.today", 7),
        ("asyncio.sleep", 9),
        ("asyncio.wait_for", 10),
        ("loop.call_later", 11),
        ("loop.time", 12),
        ("asyncio.sleep", 14),
    ]

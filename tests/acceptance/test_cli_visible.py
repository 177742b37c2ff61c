"""Stored text reaches the operator's terminal shown, never obeyed: every command that prints
a job's strings (``status``, ``attempts``, ``jobs``, ``audit``, ``timeline``, ``resolve``,
and an error) writes their escape sequences, controls, bidi overrides and zero-width
characters as visible escapes and their rich markup as it is, while ``-o json`` keeps every
string exact. The strings go through a real store (SQLite, PostgreSQL, Redis); the commands
run in-process (click's runner), as many times as hypothesis draws."""

from __future__ import annotations

import json
import unicodedata
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from rill_executor import Claim, Ledger
from rill_executor.cli import main
from rill_executor.store import Watch

# What a terminal acts on or hides: CSI, OSC (a hyperlink, a window title), C1 controls,
# bidi overrides and isolates, zero-width characters, a tag character; and rich's markup.
_FRAGMENTS = [
    "\x1b[31m",
    "\x1b[2J",
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",
    "\x1b]0;owned\x07",
    "\x9b2J",
    "\x9d0;title\x9c",
    "\x85",
    "\x00",
    "\r",
    "\n",
    "\t",
    "\x7f",
    "\u202e",
    "\u202a",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u2028",
    "\U000e0041",
    "\ud800",
    "[bold]",
    "[/]",
    "[/red]",
    "[link=http://evil.example]",
    ":smile:",
    "é",
    "段",
]
_piece = st.sampled_from(_FRAGMENTS) | st.text(max_size=3)
_hostile = st.lists(_piece, min_size=1, max_size=8).map("".join)


def _key_part(text: str) -> str:
    """What of ``text`` a key may hold: no control character or lone surrogate."""
    return "".join(c for c in text if unicodedata.category(c) not in {"Cc", "Cs"})[:40]


def _shown(result: Result, what: str) -> str:
    """What the command wrote, stdout and stderr; it ended with an exit status, not a crash."""
    assert isinstance(result.exception, SystemExit | None), (what, result.exception)
    return result.stdout + result.stderr


def _hidden(text: str) -> list[str]:
    """The characters of ``text`` a terminal would not simply show."""
    return [c for c in text if not (c.isprintable() or c == "\n")]


@pytest.fixture
def namespace() -> str:
    return f"visible-{uuid.uuid4().hex[:10]}"


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # an example runs 13 commands:
)  # shrinking one would take minutes; a failure is reported as drawn
@given(key=_hostile, message=_hostile, reason=_hostile, actor=_hostile)
@example(
    key="[bold]k[/] \u202eevil",
    message="\x1b]0;owned\x07\x1b[2J\x9b2J [/red]",
    reason="\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    actor="op\u200b\u2066",
)
def test_every_command_shows_stored_text_visibly_and_json_keeps_it_exact(
    store_url: str, tmp_path: Path, key: str, message: str, reason: str, actor: str
) -> None:
    namespace = f"visible-{uuid.uuid4().hex[:10]}"  # one a job, so that jobs lists it
    key = f"k-{_key_part(key)}"
    reason, actor = f"why {reason}", f"op {actor}"  # something left once stripped
    with Ledger(store_url, namespace=namespace, lease=timedelta(seconds=30)) as ledger:
        claim = ledger.claim(key, watch=Watch("ws:dag_c_1/encode", {"url": "http://e/cb"}))
        assert isinstance(claim, Claim)
        claim.fail(RuntimeError(message), retryable=False)
        assert ledger.record_event(key, "note.test", reason=reason, detail=message)
    where = ["--store", store_url, "--namespace", namespace]
    runner = CliRunner()
    svg = str(tmp_path / "t.svg")
    commands = {
        "status": ["status", key],
        "attempts": ["attempts", key],
        "jobs": ["jobs"],
        "audit": ["audit"],
        "timeline": ["timeline", key, "--svg", svg],
        "resolve": ["resolve", key, "--redo", "--reason", reason, "--actor", actor],
        "error": ["status", f"{key}\u202e\x1b[2J-missing"],
    }
    for name, args in commands.items():
        for output in ("text", "json"):
            if name == "resolve" and output == "json":
                continue  # resolved once, below
            shown = _shown(runner.invoke(main, [*args, *where, "-o", output]), name)
            assert _hidden(shown) == [], (name, output, shown)

    done = runner.invoke(main, ["status", key, *where, "-o", "json"])
    status: dict[str, Any] = json.loads(done.stdout)
    assert _hidden(done.stdout) == []
    assert status["key"] == key
    assert status["attempts"][0]["error"]["message"] == message
    noted, resolution = status["events"]
    assert (noted["reason"], noted["detail"]) == (reason, message)
    assert resolution["reason"] == reason.strip() and resolution["actor"] == actor.strip()
    listed = json.loads(runner.invoke(main, ["jobs", *where, "-o", "json"]).stdout)
    assert [job["key"] for job in listed["jobs"]] == [key]


def test_markup_in_stored_text_is_shown_as_it_is(store_url: str, namespace: str) -> None:
    """A key ``[bold]…[/]`` and a message ``[/red]…``: printed as written, not as rich markup
    (a closing tag with nothing open would make rich raise)."""
    key, message = "seg-[bold]1[/]", "[/red] closes nothing :smile:"
    with Ledger(store_url, namespace=namespace, lease=timedelta(seconds=30)) as ledger:
        claim = ledger.claim(key)
        assert isinstance(claim, Claim)
        claim.fail(RuntimeError(message), retryable=False)
    where = ["--store", store_url, "--namespace", namespace]
    for command in (["status", key], ["attempts", key], ["jobs"]):
        shown = CliRunner().invoke(main, [*command, *where])
        assert shown.exit_code == 0, shown.output
        assert key in shown.stdout and message in shown.stdout, shown.stdout

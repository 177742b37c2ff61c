"""A hypothesis state machine that drives a real store and checks it against a small,
independent reference model of the job lifecycle (docs/concepts.md, "Lifecycle")."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, rule

from .. import Conflict, InProgress, Replay, StaleAttempt, fingerprint_of
from ._driver import DrivenLedger, is_claim

__all__ = ["lifecycle_machine"]

SHORT_LEASE = 0.002  # dead by the time the next step runs (we sleep past it)
LONG_LEASE = 120.0  # never expires during a test
_FINGERPRINTS = {name: fingerprint_of(name) for name in ("a", "b")}


@dataclass
class _Model:
    state: str | None = None
    fence: int = 0
    fingerprint: str | None = None
    live: bool = False  # the owner's lease is live
    retryable: bool = False
    result: Any = None
    outcomes: dict[int, str] = field(default_factory=dict)  # fence -> attempt outcome
    finished: tuple[int, Any] | None = None  # (fence, completion) that ended the job

    def expect_claim(self, fp: str) -> str:
        if self.state is None:
            return "claimed"
        if fp != self.fingerprint:
            return "conflict"
        if self.state == "succeeded":
            return "replay"
        if self.state == "failed":
            return "claimed" if self.retryable else "replay"
        return "in_progress" if self.live else "claimed"

    def claimed(self, fp: str, live: bool) -> int:
        if self.state == "processing":
            self.outcomes[self.fence] = "expired"
        self.fence += 1
        self.state, self.fingerprint, self.live = "processing", fp, live
        self.finished = None
        self.outcomes[self.fence] = "running"
        return self.fence

    def may_write(self, fence: int, completion: Any = None) -> bool:
        """The owner's live lease; or a finish repeated by the attempt that finished the
        job, with the same completion (a resend after a lost reply: invariant 13)."""
        if self.state == "processing" and fence == self.fence and self.live:
            return True
        return completion is not None and self.finished == (fence, completion)


@dataclass
class _Held:
    claim: Any
    fence: int


def _kind(outcome: object) -> str:
    if is_claim(outcome):
        return "claimed"
    if isinstance(outcome, Replay):
        return "replay"
    if isinstance(outcome, InProgress):
        return "in_progress"
    assert isinstance(outcome, Conflict), outcome
    return "conflict"


def lifecycle_machine(ledger: DrivenLedger) -> type[RuleBasedStateMachine]:
    class Lifecycle(RuleBasedStateMachine):
        claims = Bundle("claims")

        def __init__(self) -> None:
            super().__init__()
            self.key = f"model-{uuid.uuid4().hex}"
            self.model = _Model()

        @rule(target=claims, fp=st.sampled_from(sorted(_FINGERPRINTS)), short=st.booleans())
        def claim(self, fp: str, short: bool) -> Any:
            expected = self.model.expect_claim(fp)
            outcome = ledger.claim(
                self.key,
                fingerprint=_FINGERPRINTS[fp],
                lease=SHORT_LEASE if short else LONG_LEASE,
            )
            assert _kind(outcome) == expected, (outcome, self.model)
            if expected != "claimed":
                if expected == "replay" and self.model.state == "succeeded":
                    assert isinstance(outcome, Replay) and outcome.result() == self.model.result
                return multiple()
            if short:
                time.sleep(SHORT_LEASE * 3)
            fence = self.model.claimed(fp, live=not short)
            assert outcome.fence == fence
            return _Held(outcome, fence)

        def _write(self, held: _Held, action: Any, completion: Any = None) -> bool:
            allowed = self.model.may_write(held.fence, completion)
            try:
                action()
            except StaleAttempt:
                assert not allowed, f"a write by the owner was rejected: {self.model}"
                return False
            assert allowed, f"a stale write was accepted: fence {held.fence}, {self.model}"
            return True

        @rule(held=claims)
        def heartbeat(self, held: _Held) -> None:
            self._write(held, held.claim.heartbeat)

        @rule(held=claims, value=st.integers(-5, 5))
        def commit(self, held: _Held, value: int) -> None:
            completion = ("succeeded", value)
            if self._write(held, lambda: held.claim.commit(value), completion):
                m = self.model
                m.state, m.result, m.live = "succeeded", value, False
                m.outcomes[held.fence] = "succeeded"
                m.finished = (held.fence, completion)

        @rule(held=claims, retryable=st.booleans())
        def fail(self, held: _Held, retryable: bool) -> None:
            completion = ("failed", retryable)
            if self._write(held, lambda: held.claim.fail("boom", retryable=retryable), completion):
                m = self.model
                m.state, m.retryable, m.live = "failed", retryable, False
                m.outcomes[held.fence] = "failed"
                m.finished = (held.fence, completion)

        @invariant()
        def store_matches_model(self) -> None:
            status = ledger.status(self.key)
            if self.model.state is None:
                assert status is None
                return
            assert status is not None
            assert status.state.value == self.model.state
            assert status.fence == self.model.fence
            assert {a.fence: a.outcome.value for a in status.attempts} == self.model.outcomes
            if self.model.state == "succeeded":
                assert status.result == self.model.result

    return Lifecycle

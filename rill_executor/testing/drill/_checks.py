"""The drill's checks: what must hold after quiescence, read from the engine's records, the
store and the output bucket, never from the executor's logs.

Each ``Check`` has a name, whether it holds, and its problems (the first ones, each naming
the task or key). A check that cannot be made (no store, no outputs) holds with ``skipped``
saying why. ``check`` opens a ``Ledger`` on the store URL (read only, but for ``gc``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from rill_executor import AttemptOutcome, JobState, JobStatus, Ledger, RillExecutorError

from ..rillflow import CallbackRecord, TaskStatus
from ._record import DrillRecord, Injected
from ._workload import Watched

__all__ = ["Check", "applied_success", "check", "counted", "task_of"]

STORE_CHECKS = (
    "committed_result",
    "no_stale_callback",
    "executions_explained",
    "no_dangling_job",
    "audit_clean",
    "orphans_collected",
    "one_output_per_key",
)
MAX_PROBLEMS = 20
SLACK = 1.0  # seconds of clock slack between the store's attempt times and the drill's
FINAL_DUPLICATE = 30601  # the engine's "repeated finish" / "is finished" / "wrong task"


class Check(BaseModel):
    """One check of a finished drill: its ``name`` (``quiescent``, ``one_result_per_key``
    …), whether it holds (``ok``; a skipped check holds, with ``skipped`` saying why), and
    its first ``problems``, each naming a task or a key."""

    model_config = ConfigDict(frozen=True)

    name: str
    ok: bool
    problems: tuple[str, ...] = ()
    count: int = 0  # how many problems in all (``problems`` lists the first ones)
    skipped: str | None = None


def _check(name: str, problems: list[str]) -> Check:
    return Check(
        name=name, ok=not problems, problems=tuple(problems[:MAX_PROBLEMS]), count=len(problems)
    )


def _skip(name: str, why: str) -> Check:
    return Check(name=name, ok=True, skipped=why)


def _body(record: CallbackRecord) -> Any:
    try:
        return json.loads(record.body_text) if record.body_text.strip() else {}
    except ValueError:
        return record.body_text


def _applied(record: CallbackRecord) -> bool:
    """The engine applied it to a RUNNING task (answered ok)."""
    return record.status_code == 200 and record.answer.get("result") == "ok"


def applied_success(record: CallbackRecord) -> bool:
    """The engine applied it, a success: the task entered SUCCEED when it was received."""
    return _applied(record) and not _failure(record)


def _failure(record: CallbackRecord) -> bool:
    """It reported a failure (``status`` other than SUCCESS): the engine's retry policy
    takes it from there, so it is no result of the key."""
    return record.query.get("status", "SUCCESS").upper() != "SUCCESS"


def counted(record: CallbackRecord) -> bool:
    """A callback that got a final answer: applied, or refused as a duplicate. The drill's
    own lost and refused callbacks, and answers that invite a resend, are not counted.
    A dispatch is notified twice when one of its callbacks was applied and another counted
    carried a different result: the work of one dispatch ran twice and both runs reported.
    The same result sent again (a crash between a callback and the record of its answer:
    delivery is at least once) is answered as a duplicate and changes nothing."""
    if "drill" in record.answer:
        return False
    return _applied(record) or record.answer.get("error_code") == FINAL_DUPLICATE


def _reports_failure(output: Mapping[str, Any] | None) -> bool:
    kind = (output or {}).get("result_type")
    return isinstance(kind, str) and kind.upper() != "SUCCESS"


def task_of(record: CallbackRecord) -> tuple[str, str]:
    return record.query.get("execution_id", ""), record.query.get("task_name", "")


def _engine_checks(rec: DrillRecord) -> list[Check]:
    keys = {(w.execution_id, w.task_name): w.key for w in rec.watched}
    unfinished = [
        f"{e}/{t}: {view.status.value}"
        + (f" ({view.message})" if view.message else "")
        + f" after {view.attempts} dispatches"
        for (e, t), view in rec.tasks.items()
        if view.status is not TaskStatus.SUCCEED
    ]
    failures = [
        f"{e}/{t}: SUCCEED with a failure in its output ({view.output}): the executor"
        " reported it with result_type, which the engine's trigger.json ignores"
        for (e, t), view in rec.tasks.items()
        if view.status is TaskStatus.SUCCEED and _reports_failure(view.output)
    ]
    results: dict[str, set[str]] = defaultdict(set)
    per_dispatch: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    took: set[tuple[str, str, str]] = set()  # dispatches whose callback the engine applied
    for cb in rec.callbacks:
        task = task_of(cb)
        if task not in keys:
            continue
        dispatch = (*task, cb.query.get("ts", ""))
        body = json.dumps(_body(cb), sort_keys=True)
        if _applied(cb) and not _failure(cb):
            results[keys[task]].add(body)
        if _applied(cb):
            took.add(dispatch)
        if counted(cb):
            per_dispatch[dispatch].add(body)
    differing = [
        f"{key}: {len(bodies)} different results applied by the engine: "
        + " | ".join(sorted(bodies))[:300]
        for key, bodies in sorted(results.items())
        if len(bodies) > 1
    ]
    twice = [
        f"{e}/{t} dispatch ts={ts}: told {len(bodies)} different results"
        for (e, t, ts), bodies in sorted(per_dispatch.items())
        if len(bodies) > 1 and (e, t, ts) in took
    ]
    return [
        _check("quiescent", [] if rec.quiescent else ["the drill gave up waiting for quiescence"]),
        _check("every_task_succeeded", unfinished),
        _check("no_failure_as_success", failures),
        _check("one_result_per_key", differing),
        _check("notified_once", twice),
    ]


def _windows(faults: list[Injected]) -> list[tuple[float, float, str]]:
    return [
        (*f.window(), f"{f.kind.value}@{f.offset}s")
        for f in faults
        if f.skipped is None
        and (f.kind.on_process or f.kind.on_store_link or f.kind.value == "store-restart")
    ]


def _unexplained(
    status: JobStatus, windows: list[tuple[float, float, str]], now: float
) -> list[str]:
    """The extra executions of a key (attempts that did not commit) that no process, link
    or store fault overlapped."""
    problems = []
    for a in status.attempts:
        if a.outcome is AttemptOutcome.SUCCEEDED and a.fence == status.fence:
            continue
        start = a.started_at.timestamp()
        end = a.ended_at.timestamp() if a.ended_at else now
        hit = [w for s, e, w in windows if s - SLACK <= end and e + SLACK >= start]
        if not hit:
            problems.append(
                f"{status.key}: attempt {a.attempt_id} (fence {a.fence}) ran and ended"
                f" {a.outcome.value}, with no fault on a process or the store meanwhile"
            )
    return problems


def _store_checks(
    rec: DrillRecord, ledger: Ledger, outputs_per_key: int | None, with_outputs: bool
) -> list[Check]:
    by_key: dict[tuple[str, str | None], list[Watched]] = defaultdict(list)
    for w in rec.watched:
        by_key[(w.key, w.handler)].append(w)
    applied: dict[tuple[str, str], list[Any]] = defaultdict(list)
    failed: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for cb in rec.callbacks:
        if _applied(cb):
            (failed if _failure(cb) else applied)[task_of(cb)].append(_body(cb))
    windows = _windows(rec.faults)
    mismatched: list[str] = []
    stale: list[str] = []
    executions: list[str] = []
    outputs: list[str] = []
    statuses: dict[str, JobStatus] = {}
    for (key, handler), watched in sorted(by_key.items(), key=lambda kv: kv[0][0]):
        status = ledger.status(key, handler=handler)
        if status is None:
            mismatched.append(f"{key}: no job in the store")
            continue
        statuses[key] = status
        if status.state is not JobState.SUCCEEDED:
            if status.state is not JobState.PROCESSING:  # that one is dangling, below
                mismatched.append(f"{key}: the job is {status.state.value}")
            continue
        committed = status.result if isinstance(status.result, dict) else {"data": status.result}
        for w in watched:
            view = rec.tasks[(w.execution_id, w.task_name)]
            if view.status is TaskStatus.SUCCEED and view.output != committed:
                mismatched.append(
                    f"{w.execution_id}/{w.task_name}: the engine holds {view.output},"
                    f" the store committed {committed}"
                )
            stale.extend(
                f"{w.execution_id}/{w.task_name}: the engine applied {body}, not the committed"
                f" {committed}"
                for body in applied[(w.execution_id, w.task_name)]
                if body != committed
            )
            stale.extend(
                f"{w.execution_id}/{w.task_name}: the engine applied the failure {body},"
                " which no attempt of the key recorded"
                for body in failed[(w.execution_id, w.task_name)]
                if not _recorded_failure(status, body)
            )
        executions.extend(_unexplained(status, windows, rec.quiet))
        expected = next((w.outputs for w in watched if w.outputs is not None), outputs_per_key)
        if expected is not None and len(status.outputs) != expected:
            outputs.append(f"{key}: {len(status.outputs)} committed outputs, expected {expected}")
        if with_outputs:
            outputs.extend(_unverified(ledger, status))
    dangling = [
        f"{key}: still processing after quiescence"
        for key, status in statuses.items()
        if status.state is JobState.PROCESSING
    ]
    checks = [
        _check("committed_result", mismatched),
        _check("no_stale_callback", stale),
        _check("executions_explained", executions),
        _check("no_dangling_job", dangling),
    ]
    audit = ledger.drill()
    ours = {status.key for status in statuses.values()}
    broken = [f"{f.key}: {f.invariant}: {f.detail}" for f in audit.broken if f.key in ours]
    checks.append(_check("audit_clean", broken))
    counted = outputs_per_key is not None or any(w.outputs is not None for w in rec.watched)
    return checks + _output_checks(ledger, outputs, counted, with_outputs)


def _recorded_failure(status: JobStatus, body: Any) -> bool:
    """A FAILED callback's error is one an attempt of the job ended with (at its own fence:
    a fenced attempt's finish is refused, so it ends nothing)."""
    if not isinstance(body, dict):
        return False
    code, message = str(body.get("error_code", "")), str(body.get("error_msg", ""))
    return any(
        a.error is not None and a.error.type[:200] == code and a.error.message.startswith(message)
        for a in status.attempts
    )


def _unverified(ledger: Ledger, status: JobStatus) -> list[str]:
    """The committed outputs whose object in the bucket is not what the commit recorded."""
    problems = []
    for ref in status.outputs:
        try:
            ledger.verify(ref)
        except RillExecutorError as exc:
            problems.append(f"{status.key}: output {ref.name}: {exc}")
    return problems


def _output_checks(
    ledger: Ledger, per_key: list[str], counted: bool, with_outputs: bool
) -> list[Check]:
    if not with_outputs:
        return [
            _skip(n, "no output store given") for n in ("orphans_collected", "one_output_per_key")
        ]
    ledger.collect_orphans(grace=timedelta(0))
    left = ledger.drill().orphan_outputs or 0
    return [
        _check("orphans_collected", [f"{left} orphan outputs left after gc"] if left else []),
        _check("one_output_per_key", per_key)
        if counted
        else _skip("one_output_per_key", "the workload names no output count"),
    ]


def check(
    rec: DrillRecord,
    *,
    namespace: str,
    outputs: str | None = None,
    outputs_per_key: int | None = None,
) -> list[Check]:
    """Every check of a finished drill: the engine's always, the store's when the drill
    was given a store URL, the outputs' when it was given an output store URL."""
    checks = _engine_checks(rec)
    if rec.store is None:
        return checks + [_skip(n, "no store given") for n in STORE_CHECKS]
    with Ledger(rec.store, namespace=namespace, outputs=outputs) as ledger:
        return checks + _store_checks(rec, ledger, outputs_per_key, outputs is not None)

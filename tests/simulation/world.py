"""A deterministic simulation of the ledger's protocol on the in-memory store.

One seed makes one schedule. Logical callers — decorated calls (the ledger's own ``call``
step) and explicit claims — deliverers of the outbox and an operator act one store call at a
time, in an order a seeded scheduler draws, on a ``VirtualClock``. Faults are drawn by the
same generator: a request lost before the store saw it, a reply lost after the store applied
it, a process that dies between any two of its actions (or mid-handler), a pause longer than
a lease, and the clock stepping forward. After every action the store is checked against the
protocol's invariants (``Invariants``); at the end every fault stops, every process left
finishes, the clock runs past every lease and the deliverers drain the outbox, and the
notices owed are checked. A broken invariant raises ``Violation`` with the seed and the
schedule as it ran; running the seed again replays it exactly.

The steps are the library's own (``call``, ``claiming``, the claim types, the store's
rules): the simulation decides only *when* each action happens and what the world answers.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from datetime import timedelta
from json import loads as parse
from typing import Any

from rill_executor import Claim, Ledger, StaleAttempt, StoreUnavailable
from rill_executor._claim import resend_once
from rill_executor._config import LedgerConfig
from rill_executor._idempotent import IdempotentOptions, IdempotentSpec
from rill_executor._records import AttemptOutcome, AttemptRow, JobRow, JobState
from rill_executor._rules.resolution import NO_RESULT, resolution_request
from rill_executor._steps.call import (
    Action,
    Finish,
    Own,
    Renew,
    Run,
    SendClaim,
    Sleep,
    call,
    claiming,
)
from rill_executor._steps.store_calls import StoreCall
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobQuery,
    MemoryStore,
    NoticeSettlement,
    NoticeStatus,
    PurgeRequest,
    Resolution,
    Watch,
)
from rill_executor.testing import VirtualClock

__all__ = ["Settings", "Violation", "World", "run"]

NAMESPACE = "sim"
LEASE_S = 1.0
LEASE_US = 1_000_000
RETENTION = timedelta(seconds=20)
_RUNNING = AttemptOutcome.RUNNING
UNRECORDED = "rill-executor: this failure could not be recorded"  # the ledger's note


def _target(target: Any) -> Hashable:
    """A watch's target as a set keeps it: as it is if a string (the simulation's), else
    its JSON text."""
    return target if isinstance(target, str) else json.dumps(target, sort_keys=True)


class Violation(AssertionError):
    """An invariant broke: the message names it, the seed and the schedule that broke it."""


@dataclass(frozen=True)
class Settings:
    """The size of a world and how often things go wrong in it (per action)."""

    keys: int = 2
    callers: int = 4
    steps: int = 40
    lost_send: float = 0.05
    lost_reply: float = 0.05
    crash: float = 0.03
    pause: float = 0.04
    clock_step: float = 0.05
    operator: float = 0.05


def work(key: str) -> str:
    """The handler every caller runs (the simulation decides how a run goes)."""
    raise AssertionError("the simulation performs Run itself")


def _same_key(key: str) -> str:
    return key


OPTIONS = IdempotentOptions(key=_same_key, name="work", heartbeat=False, wait=2.0)
_SPECS: dict[LedgerConfig, IdempotentSpec] = {}  # built once a process: every world's alike


class FaultyStore:
    """The memory store as the network shows it: a call may be lost before the store sees
    it, or its reply after the store applied it. It also reports every applied write to the
    invariants, with the job as it was before."""

    kind = "memory"

    def __init__(self, world: World) -> None:
        self.world = world
        self.memory = MemoryStore(clock=world.clock)
        self.faults = True
        self.unfinished: set[str] = set()  # attempts whose last finish was lost

    def store_id(self) -> str:
        return self.memory.store_id()

    def _send(self, what: str, who: str, apply: Callable[[], Any]) -> Any:
        """``apply()`` as the network shows it; ``what`` by ``who`` names the call (the
        name is built only for a fault's note)."""
        world = self.world
        if self.faults and world.chance(world.settings.lost_send):
            world.note("  %s by %s: lost before the store", what, who)
            raise StoreUnavailable(f"simulated: {what} by {who} lost before the store")
        answer = apply()
        if self.faults and world.chance(world.settings.lost_reply):
            world.note("  %s by %s: applied, reply lost", what, who)
            raise StoreUnavailable(f"simulated: the reply to {what} by {who} was lost")
        return answer

    def claim(self, request: ClaimRequest) -> Any:
        def apply() -> Any:
            before = self.memory._jobs.get(request.job_id)
            answer = self.memory.claim(request)
            self.world.invariants.claimed(request, before, answer)
            return answer

        return self._send("claim", request.attempt_id, apply)

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> Any:
        return self._write("heartbeat", ref, lambda: self.memory.heartbeat(ref, lease_us))

    def register_output(self, ref: AttemptRef, output: str) -> Any:
        return self._write("register", ref, lambda: self.memory.register_output(ref, output))

    def finish(self, ref: AttemptRef, completion: Completion) -> Any:
        try:
            answer = self._write(
                "finish", ref, lambda: self.memory.finish(ref, completion), completion
            )
        except StoreUnavailable:
            self.unfinished.add(ref.attempt_id)  # its last finish may not have reached the store
            raise
        self.unfinished.discard(ref.attempt_id)
        return answer

    def _write(
        self, what: str, ref: AttemptRef, apply: Callable[[], Any], done: Completion | None = None
    ) -> Any:
        def checked() -> Any:
            before = self.memory._jobs.get(ref.job_id)
            answer = apply()
            self.world.invariants.wrote(what, ref, before, answer, done)
            return answer

        return self._send(what, ref.attempt_id, checked)

    def status(self, job_id: str) -> Any:
        return self.memory.status(job_id)

    def record_event(self, job_id: str, event: str) -> bool:
        return self.memory.record_event(job_id, event)

    def list_jobs(self, query: JobQuery) -> Any:
        return self.memory.list_jobs(query)

    def resolve(self, job_id: str, resolution: Resolution) -> Any:
        return self.memory.resolve(job_id, resolution)

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> Any:
        return self._send(
            "lease of notices",
            owner,
            lambda: self.memory.lease_notices(namespace, owner, lease_us, limit),
        )

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        def apply() -> bool:
            settled = self.memory.settle_notice(job_id, settlement)
            if settled and settlement.status == NoticeStatus.DELIVERED:
                self.world.invariants.delivered(job_id, settlement.notice_id)
            return settled

        result: bool = self._send("settle", settlement.owner, apply)
        return result

    def purge(self, request: PurgeRequest) -> Any:
        return self.memory.purge(request)

    def close(self) -> None:
        pass


@dataclass
class Invariants:
    """What must hold after every action (ARCHITECTURE.md, section 4)."""

    world: World
    fences: dict[str, int] = field(default_factory=dict)  # job id -> highest fence seen
    commits: dict[str, int] = field(default_factory=dict)  # job id -> commits since a reset
    # (job id, watch id) -> the newest target a claim asked to be told at
    watches: dict[tuple[str, str], Hashable] = field(default_factory=dict)
    sent: set[tuple[str, str, Hashable]] = field(default_factory=set)  # (job, watch, target)
    settled: set[tuple[str, str]] = field(default_factory=set)  # (job id, notice id)

    def fail(self, what: str) -> None:
        raise Violation(what)

    reached: set[str] = field(default_factory=set)  # attempts whose claim reached the store
    # job id -> the row and attempts ``after_step`` last judged
    checked: dict[str, tuple[JobRow, list[AttemptRow]]] = field(default_factory=dict)
    told_unrecorded: int = 0  # callers told by a note that their failure was not recorded

    def claimed(self, request: ClaimRequest, before: JobRow | None, answer: Any) -> None:
        """A claim the store saw: its watch is owed a notice; a job claimed afresh (new,
        or released: its retention over, or redone) may commit once more."""
        self.reached.add(request.attempt_id)
        if request.watch is not None and (answer.ok or answer.job is not None):
            entry = parse(request.watch)
            self.watches[(request.job_id, entry["id"])] = _target(entry["target"])
        if answer.ok and (before is None or before.state is not JobState.PROCESSING):
            self.commits.pop(request.job_id, None)

    def wrote(
        self,
        what: str,
        ref: AttemptRef,
        before: JobRow | None,
        answer: Any,
        done: Completion | None,
    ) -> None:
        """No write of a superseded attempt lands (2, 13), and a result is committed at
        most once between two operator resets (3)."""
        if not answer.ok:
            if before is not None and answer.job != before:
                self.fail(f"a refused {what} by {ref.attempt_id} changed the job")
            return
        now = answer.now
        owner = (
            before is not None
            and before.fence == ref.fence
            and before.owner_attempt == ref.attempt_id
        )
        live = (
            owner
            and before is not None
            and before.state is JobState.PROCESSING
            and (before.lease_until or 0) > now
        )
        resent = (
            owner
            and done is not None
            and before is not None
            and before.state is not JobState.PROCESSING
            and answer.job == before
        )
        if not (live or resent):
            self.fail(
                f"{what} by {ref.attempt_id} at fence {ref.fence} landed on a job it did not"
                f" own live: {before}"
            )
        if done is not None and not resent and done.state is JobState.SUCCEEDED:
            count = self.commits.get(ref.job_id, 0) + 1
            if count > 1:
                self.fail(f"job {ref.job_id} committed a second result (fence {ref.fence})")
            self.commits[ref.job_id] = count

    def delivered(self, job_id: str, notice_id: str) -> None:
        """A notice is delivered once (its settlement is fenced by its lease)."""
        if (job_id, notice_id) in self.settled:
            self.fail(f"notice {notice_id} of {job_id} settled as delivered twice")
        self.settled.add((job_id, notice_id))

    def after_step(self) -> None:
        """Fences never go back (1); only the owner's attempt is running (4).

        Both are judged on a job's row and its attempts alone: a job whose row and attempts
        are the very ones that held at the last step (rows are immutable) still holds, and
        is not judged again."""
        memory, fences, checked = self.world.store.memory, self.fences, self.checked
        attempts = memory._attempts
        for job_id, job in memory._jobs.items():
            history = attempts.get(job_id, [])
            last = checked.get(job_id)
            if last is not None and last[0] is job and last[1] == history:
                continue
            checked[job_id] = (job, list(history))
            fence = job.fence
            if fence < fences.get(job_id, 0):
                self.fail(f"job {job_id}'s fence went back to {fence}")
            fences[job_id] = fence
            processing = job.state is JobState.PROCESSING
            for attempt in history:
                if attempt.outcome is _RUNNING and not (processing and attempt.fence == fence):
                    self.fail(
                        f"attempt {attempt.attempt_id} at fence {attempt.fence} is still"
                        f" running on {job.state.value} job {job_id} at fence {fence}"
                    )
        if memory._fences:
            for job_id, (_, fence, _) in memory._fences.items():
                if job_id not in memory._jobs and fence < fences.get(job_id, 0):
                    self.fail(f"purged job {job_id} kept fence {fence}, below one already given")

    def ended(self, caller: Caller, error: BaseException | None) -> None:
        """Once a handler ran, its attempt ends recorded, unless the caller was told the
        store was unreachable — the store's error, or its handler's own error with the note
        that its failure could not be recorded, after its last finish was lost — or its
        finish came after its lease ran out (11): then the job's next claim records it as
        expired."""
        claim = caller.ran
        if claim is None or isinstance(error, StoreUnavailable):
            return
        notes = getattr(error, "__notes__", ())
        if claim.attempt_id in self.world.store.unfinished and any(
            note.startswith(UNRECORDED) for note in notes
        ):
            self.told_unrecorded += 1
            return
        memory = self.world.store.memory
        job = memory._jobs.get(claim.job_id)
        lapsed = job is not None and (job.lease_until or 0) <= memory._now()
        if lapsed and job is not None and job.fence == claim.fence:
            return  # its finish came after its lease: the next claim ends it as expired
        for attempt in memory._attempts.get(claim.job_id, ()):
            if attempt.fence == claim.fence and attempt.outcome is AttemptOutcome.RUNNING:
                self.fail(
                    f"{caller.name}'s attempt {claim.attempt_id} ended ({error!r}) but is"
                    " recorded as running"
                )

    def told(self) -> None:
        """Every watch is told of the job's end: the newest target each watch named got a
        notice of an ended job (16, 20)."""
        memory = self.world.store.memory
        for (job_id, watch), target in self.watches.items():
            job = memory._jobs.get(job_id)
            if job is None:
                continue  # purged: the notices owed kept it until sent (checked while it was)
            if (job_id, watch, target) not in self.sent:
                self.fail(f"watch {watch} of {job_id} was never told at {target!r}")


class Actor:
    name: str
    wake_ns: int = 0
    alive: bool = True

    def act(self) -> None:
        raise NotImplementedError


class Caller(Actor):
    """A process calling the handler once: a decorated call or an explicit claim, run as
    the ledger runs it, one action per turn."""

    def __init__(
        self,
        world: World,
        name: str,
        key: str,
        flow: Generator[Action, Any, Any],
        decorated: bool = False,
        watched: bool = False,
    ) -> None:
        self.world, self.name, self.key, self.flow = world, name, key, flow
        self.decorated, self.watched = decorated, watched
        self.action: Action | None = None
        self.ran: Claim | None = None  # the claim a handler run was started under
        self._advance(None, None)

    def _advance(self, reply: Any, error: BaseException | None) -> None:
        try:
            self.action = self.flow.send(reply) if error is None else self.flow.throw(error)
        except StopIteration as done:
            self._end(done.value, None)
        except Exception as exc:  # how the call ended, for the record
            self._end(None, exc)

    def _end(self, value: Any, error: BaseException | None) -> None:
        self.alive, self.action = False, None
        self.world.dying = True
        self.world.note("  %s ended: %r", self.name, error or value)
        self.world.invariants.ended(self, error)
        self._lost()

    def _lost(self) -> None:
        """The engine sends a watched dispatch again if its claim never reached the store."""
        if self.watched and self.name not in self.world.invariants.reached:
            self.world.note("  %s never reached the store: the engine sends it again", self.name)
            self.world.spawn_caller(self.key, decorated=self.decorated, watched=True)

    def act(self) -> None:
        world, action = self.world, self.action
        if world.faults and world.chance(world.settings.crash):
            world.note("%s dies before %s", self.name, type(action).__name__)
            self.alive = False  # its step is never resumed
            world.dying = True
            self._lost()
            return
        if world.faults and world.chance(world.settings.pause):
            pause = world.rng.uniform(LEASE_S, 3 * LEASE_S)
            world.note("%s pauses %.2f s before %s", self.name, pause, type(action).__name__)
            self.wake_ns = world.clock.monotonic_ns() + round(pause * 1e9)
            return
        world.note("%s: %s", self.name, action)
        try:
            reply = self._perform(action)
        except Exception as exc:  # raised into the step at its yield
            self._advance(None, exc)
            return
        if reply is not _LATER:
            self._advance(reply, None)

    def _perform(self, action: Action | None) -> Any:
        world = self.world
        match action:
            case SendClaim(request):
                return resend_once(lambda: world.store.claim(request))
            case Own(row):
                return Claim(world.ledger._core, world.store, row)
            case Run(claim):
                return self._running(claim)
            case Finish(claim, completion):
                return claim.finish(completion)  # type: ignore[attr-defined]
            case Renew(claim):
                return claim.heartbeat()  # type: ignore[attr-defined]
            case Sleep(seconds):  # at least a nanosecond, as VirtualClock.sleep
                self.wake_ns = world.clock.monotonic_ns() + (
                    max(round(seconds * 1e9), 1) if seconds > 0 else 0
                )
                return None
            case StoreCall():
                return action.on(world.store)
        raise AssertionError(f"no such action in the simulation: {action!r}")

    def _running(self, claim: Any) -> Any:
        """A turn of the handler: a heartbeat, or its end (a result or an error)."""
        self.ran = claim
        world = self.world
        draw = world.rng.random()
        if world.faults and draw < 0.35:
            try:
                claim.heartbeat()
                world.note("  %s renewed its lease", self.name)
            except (StaleAttempt, StoreUnavailable) as exc:
                world.note("  %s's heartbeat: %s", self.name, type(exc).__name__)
            self.wake_ns = world.clock.monotonic_ns() + round(
                world.rng.uniform(0, LEASE_S / 2) * 1e9
            )
            return _LATER
        if world.faults and draw < 0.45:
            raise RuntimeError("the work failed (retryable)")
        return f"{self.key}@{claim.fence}"


_LATER = object()  # the action goes on at the actor's next turn


def _shown(value: Any) -> Any:
    """An action as the schedule shows it; anything else as it is."""
    match value:
        case SendClaim(request):
            return f"claim {request.key} as {request.attempt_id}"
        case Finish(claim, completion):
            return f"finish fence {claim.fence}: {completion.state.value}"
        case Sleep(seconds):
            return f"sleep {seconds:.3f} s"
        case Own() | Run() | Renew():
            return type(value).__name__
    return value


def explicit(
    world: World,
    key: str,
    attempt_id: str,
    watch: Watch | None,
    fingerprint: str | None = None,
) -> Generator[Action, Any, Any]:
    """An explicit claim, run and finish, as a service writes it with ``ledger.claim``."""
    core = world.ledger._core
    request = core.claim_request(
        key, fingerprint=fingerprint, result_version=None, attempt_id=attempt_id, watch=watch
    )
    outcome = yield from claiming(core, request)
    if not isinstance(outcome, Claim):
        return outcome
    return (yield from owned(world, outcome, key))


def owned(world: World, claim: Claim, key: str) -> Generator[Action, Any, Any]:
    """The work under a claim already made, its end recorded."""
    try:
        result = yield Run(claim, world.spec, (key,), {})
    except Exception as exc:  # a service records its failures
        yield Finish(claim, claim.failure_of(exc, retryable=True))
        raise
    yield Finish(claim, claim.commit_of(result))
    return result


class Deliverer(Actor):
    """A process sending the outbox: leases a batch of notices, then sends and settles them
    one a turn; a lapse notice re-drives its job (a takeover that runs it again)."""

    def __init__(self, world: World, name: str) -> None:
        self.world, self.name = world, name
        self.batch: list[Any] = []

    def act(self) -> None:
        world = self.world
        if world.faults and world.chance(world.settings.crash):
            world.note("%s dies holding %d notices", self.name, len(self.batch))
            self.batch = []  # a new process takes its place; its leases run out
            return
        if not self.batch:
            world.note("%s: lease notices", self.name)
            with contextlib.suppress(StoreUnavailable):
                self.batch = list(
                    world.store.lease_notices(NAMESPACE, self.name, LEASE_US, 4).notices
                )
            if not self.batch:
                self.wake_ns = world.clock.monotonic_ns() + round(LEASE_S / 2 * 1e9)
            return
        leased = self.batch.pop(0)
        notice = parse(leased.notice)
        if notice["state"] == JobState.PROCESSING.value:
            try:
                self._redrive(leased, notice)
            except StoreUnavailable:
                return  # not settled: its lease runs out and a deliverer leases it again
        else:
            world.note(
                "%s: send %s of %s to %s", self.name, notice["id"], leased.key, notice["target"]
            )
            world.invariants.sent.add((leased.job_id, notice["watch"], _target(notice["target"])))
        settlement = NoticeSettlement(notice["id"], self.name, NoticeStatus.DELIVERED, "ok")
        with contextlib.suppress(StoreUnavailable):
            world.store.settle_notice(leased.job_id, settlement)

    def _redrive(self, leased: Any, notice: dict[str, Any]) -> None:
        """The job's owner lapsed: run it again under a takeover (``Redriver``'s way)."""
        world = self.world
        status = world.store.memory.status(leased.job_id)
        if status is None or status.job.state is not JobState.PROCESSING:
            return
        if status.job.fence != notice["fence"]:
            return
        attempt = f"redrive-{world.next_id()}"
        world.note(
            "%s: re-drive %s as %s (lapsed at fence %s)",
            self.name,
            leased.key,
            attempt,
            notice["fence"],
        )
        core = world.ledger._core
        request = core.claim_request(
            leased.key, fingerprint=status.job.fingerprint, result_version=None, attempt_id=attempt
        )
        answer, resent = resend_once(lambda: world.store.claim(request))  # raises: not settled
        taken = core.claim_outcome(request, answer, resent=resent)
        if isinstance(taken, JobRow):  # the run goes on in the background, as a task
            claim = Claim(core, world.store, taken)
            world.actors.append(Caller(world, attempt, leased.key, owned(world, claim, leased.key)))


class Operator(Actor):
    """An operator who now and then resolves a job or purges the namespace."""

    def __init__(self, world: World) -> None:
        self.world, self.name = world, "operator"

    def act(self) -> None:
        world = self.world
        self.wake_ns = world.clock.monotonic_ns() + round(world.rng.uniform(0.5, 3) * 1e9)
        if not world.chance(world.settings.operator * 10):
            return
        jobs = sorted(world.store.memory._jobs)
        if not jobs:
            return
        job_id = world.rng.choice(jobs)
        if world.chance(0.2):
            world.note("operator: purge")
            world.store.purge(PurgeRequest(NAMESPACE, dangling_after_us=LEASE_US * 5))
            return
        action = world.rng.choice(("redo", "terminate", "reuse"))
        resolution = resolution_request(
            action,
            reason="simulated",
            actor="operator",
            force=world.chance(0.5),
            result=NO_RESULT,
            retention_us=int(RETENTION.total_seconds() * 1e6),
            max_result_bytes=1024,
        )
        answer = world.store.resolve(job_id, resolution)
        world.note("operator: %s %s: %s", action, job_id[:12], "done" if answer.ok else "refused")
        if answer.ok and action == "redo":  # the engine's redo: the task dispatched again
            key = world.store.memory._jobs[job_id].key
            decorated = key.startswith("work/")
            world.spawn_caller(key.removeprefix("work/"), decorated=decorated, watched=True)


class World:
    """One schedule: its seed draws everything."""

    def __init__(self, seed: int, settings: Settings = Settings()) -> None:
        self.seed, self.settings = seed, settings
        self.rng = random.Random(seed)
        self.clock = VirtualClock()
        self.store = FaultyStore(self)
        self.ledger = Ledger(
            self.store,
            namespace=NAMESPACE,
            lease=LEASE_S,
            retention=RETENTION,
            clock=self.clock,
        )
        config = self.ledger.config
        if (spec := _SPECS.get(config)) is None:
            spec = _SPECS[config] = self.ledger.spec(work, OPTIONS)
        self.spec = spec
        self.invariants = Invariants(self)
        self.keys = [f"k{i}" for i in range(settings.keys)]
        self.actors: list[Actor] = [Deliverer(self, "d1"), Deliverer(self, "d2"), Operator(self)]
        self.schedule: list[tuple[int, str, tuple[Any, ...]]] = []
        self._ids = 0
        self.faults = True
        self.dying = False  # an actor died since the last turn

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def note(self, line: str, *args: Any) -> None:
        """A line of the schedule: formatted only if it is ever shown."""
        self.schedule.append((self.clock.monotonic_ns(), line, args))

    def written(self) -> str:
        """The schedule as it ran, one action a line."""
        return "\n".join(
            f"{ns / 1e9:8.3f} {line % tuple(_shown(a) for a in args)}"
            for ns, line, args in self.schedule
        )

    def spawn_caller(
        self, key: str | None = None, *, decorated: bool | None = None, watched: bool | None = None
    ) -> None:
        """A dispatch of ``key`` (drawn if None): a decorated call or an explicit claim,
        watched or not. A watched one lost before its claim reached the store is sent again,
        as the engine retries a dispatch it got no answer to."""
        n = self.next_id()
        key = self.rng.choice(self.keys) if key is None else key
        decorated = self.chance(0.5) if decorated is None else decorated
        watched = self.chance(0.7) if watched is None else watched
        watch = Watch(f"task-{key}", f"cb{n}") if watched else None
        name = f"c{n}"
        if decorated:
            options = {"attempt_id": name, "watch": watch}
            flow = call(self.ledger._core, self.spec, (key,), {}, options)
        else:
            flow = explicit(self, key, name, watch)
        self.actors.append(Caller(self, name, key, flow, decorated, watched))

    def _turn(self) -> bool:
        """One action of one actor (time passes first); False when nobody is left."""
        if self.dying:  # an actor died since the last turn: the dead leave
            self.actors = [a for a in self.actors if a.alive]
            self.dying = False
        actors = self.actors
        now = self.clock.monotonic_ns()
        runnable = [a for a in actors if a.wake_ns <= now]
        if not runnable:
            if not actors:
                return False
            self.clock.advance((min(a.wake_ns for a in actors) - now) / 1e9)
            now = self.clock.monotonic_ns()
            runnable = [a for a in actors if a.wake_ns <= now]
        if self.faults and self.chance(self.settings.clock_step):
            step = self.rng.uniform(LEASE_S, 4 * LEASE_S)
            self.note("the clock steps %.2f s", step)
            self.clock.advance(step)
        elif self.faults:
            self.clock.advance(self.rng.uniform(0, LEASE_S / 5))
        self.rng.choice(runnable).act()
        self.invariants.after_step()
        return True

    def run(self) -> None:
        for _ in range(self.settings.callers):
            self.spawn_caller()
        for _ in range(self.settings.steps):
            if self.chance(0.1):
                self.spawn_caller()
            if not self._turn():
                break
        self.settle()

    def settle(self) -> None:
        """No more faults: whatever runs finishes, time runs past every lease, and the
        deliverers drain the outbox; then the notices owed are checked."""
        self.faults = self.store.faults = False
        self.note("-- faults end --")
        self.actors = [a for a in self.actors if not isinstance(a, Operator)]
        for _ in range(2000):
            callers = [a for a in self.actors if isinstance(a, Caller) and a.alive]
            if not callers and not self._outbox_busy():
                break
            self._turn()
        else:
            raise Violation("the world did not settle in 2000 turns")
        self.invariants.told()

    def _outbox_busy(self) -> bool:
        """A watched job still processing, a notice pending, or a batch being sent (texts
        that cannot hold either are not parsed)."""
        for job in self.store.memory._jobs.values():
            watchers = job.watchers
            if job.state is JobState.PROCESSING and watchers not in ("", "{}") and parse(watchers):
                return True
            if '"pending"' in job.notices and any(
                n["status"] == NoticeStatus.PENDING for n in parse(job.notices)
            ):
                return True
        return any(isinstance(a, Deliverer) and a.batch for a in self.actors)


def run(seed: int, settings: Settings = Settings()) -> World:
    """Run one schedule; a broken invariant raises ``Violation`` naming the seed, with the
    schedule as it ran."""
    world = World(seed, settings)
    try:
        world.run()
    except Violation as exc:
        raise Violation(f"seed {seed}: {exc}\nschedule:\n{world.written()}") from None
    return world

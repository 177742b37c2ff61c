"""One job as a picture: its attempts as bars on the store's time axis, as SVG text.

Pure: ``timeline_svg(status)`` reads nothing but the ``JobStatus`` it is given (the store's
clock included) and returns the same text for the same status. Each bar and marker is a
``<g>`` whose ``data-`` attributes say what it shows and whose ``<title>`` a browser shows
on hover, so a test or a script reads the picture's structure, not its pixels.

Only what the record holds is drawn: heartbeats are not kept one by one, just the current
owner's lease end; an expired attempt's bar ends when the takeover recorded it expired.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .. import AttemptOutcome, JobState, JobStatus
from ..reports import AttemptInfo, EventInfo, NoticeInfo, OwnerInfo
from . import _svg as svg
from ._svg import el, label, titled

__all__ = ["WIDTH", "timeline_svg"]

WIDTH = 960
LEFT, RIGHT = 236, 28  # the row labels' column; the margin right of the axis
PLOT = WIDTH - LEFT - RIGHT
HEAD, LANE, ROW = 78, 16, 48  # title; a line of labels above the rows; a row
BAR_TOP, BAR_H = 8, 18
FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
MUTED, GRID, RULE = "#59636e", "#d8dee4", "#eef1f4"
OUTCOME_COLOUR = {
    AttemptOutcome.SUCCEEDED: "#2e7d32",
    AttemptOutcome.FAILED: "#c62828",
    AttemptOutcome.EXPIRED: "#7b1fa2",
    AttemptOutcome.FENCED: "#d81b60",
    AttemptOutcome.ABANDONED: "#757575",
    AttemptOutcome.RUNNING: "#ef8f00",
}
NOTICE_COLOUR = {"delivered": "#2e7d32", "dropped": "#c62828", "pending": "#ef8f00"}
RESOLUTION, REFUSED, COMMIT = "#0b57d0", "#c62828", "#1b5e20"
TAKEOVER = OUTCOME_COLOUR[AttemptOutcome.EXPIRED]
RESOLVED, TOKEN_REFUSED = "resolved", "token_refused"
_US, _MINUTE = 1_000_000, 60_000_000
# Tick steps (µs): the smallest that keeps the axis to at most 8 ticks.
_STEPS = [n * 1000 for n in (1, 2, 5, 10, 20, 50, 100, 200, 500)]
_STEPS += [n * _US for n in (1, 2, 5, 10, 15, 30)]
_STEPS += [n * _MINUTE for n in (1, 2, 5, 10, 15, 30)]
_STEPS += [n * 60 * _MINUTE for n in (1, 2, 3, 6, 12, 24, 48, 168, 672, 2184, 8736)]


def timeline_svg(status: JobStatus) -> str:
    """The SVG picture of ``status``: a row per attempt, then one per completion notice and
    one for events that name no attempt; markers, a time axis and a legend."""
    return svg.serialise(_Picture(status).draw())


# -- time -------------------------------------------------------------------------------------


def _us(at: datetime) -> int:
    return round(at.timestamp() * _US)


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _span(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {sec:02d}s" if sec else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m" if minutes else f"{hours}h"
    return f"{hours // 24}d {hours % 24}h"


def _fit(text: str, width: float, size: float) -> str:
    """``text`` cut to ``width`` with an ellipsis: the whole of it is in a ``<title>``."""
    most = int(width / svg.text_width("m", size))
    return text if len(text) <= most else text[: most - 1] + "…"


@dataclass(frozen=True)
class _Scale:
    start: int  # µs on the store's clock
    end: int

    @classmethod
    def of(cls, times: list[int]) -> _Scale:
        low, high = min(times), max(times)
        pad = (high - low) // 30 if high > low else 500_000
        return cls(low - pad, high + pad)

    def x(self, at: datetime | int) -> float:
        us = at if isinstance(at, int) else _us(at)
        return LEFT + PLOT * (us - self.start) / (self.end - self.start)

    def step(self) -> int:
        return next((s for s in _STEPS if (self.end - self.start) / s <= 8), _STEPS[-1])

    def ticks(self) -> Iterator[tuple[int, str]]:
        step = self.step()
        form = (
            "%H:%M:%S.%f" if step < _US else "%H:%M:%S" if step < _MINUTE
            else "%H:%M" if step < 1440 * _MINUTE else "%m-%d %H:%M" if step < 40320 * _MINUTE
            else "%Y-%m-%d"
        )  # fmt: skip
        for us in range(-(-self.start // step) * step, self.end + 1, step):
            text = datetime.fromtimestamp(us / _US, tz=UTC).strftime(form)
            yield us, text[:-3] if step < _US else text


# -- the picture ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Mark:
    """A vertical line through every row with a label above them: a resolution, the clock."""

    x: float
    text: str
    event: EventInfo | None  # None: the store's clock
    lane: int = 0


class _Picture:
    def __init__(self, status: JobStatus) -> None:
        self.status = s = status
        ids = {(a.attempt_id, a.fence) for a in s.attempts}
        self.loose = [
            e for e in s.events if e.kind != RESOLVED and (e.attempt_id, e.fence) not in ids
        ]
        recorded = _recorded(s)
        now, self.last = _us(s.store_time), max(recorded)
        # A job reviewed long after it ended would shrink to a sliver beside the clock.
        near = now - self.last <= (self.last - min(recorded)) // 4
        self.now_shown = s.state is JobState.PROCESSING or near
        self.scale = _Scale.of(recorded + ([now] if self.now_shown else []))
        self.marks = self._placed_marks()
        self.top = HEAD + LANE * max([m.lane + 1 for m in self.marks] or [1]) + 6
        self.rows = len(s.attempts) + len(s.notices) + (1 if self.loose else 0)
        self.bottom = self.top + ROW * max(self.rows, 1)
        self.height = self.bottom + 108

    def _placed_marks(self) -> list[_Mark]:
        marks = [_Mark(self.scale.x(e.at), _resolution_label(e), e)
                 for e in self.status.events if e.kind == RESOLVED]  # fmt: skip
        if self.now_shown:
            marks.append(_Mark(self.scale.x(self.status.store_time), "store clock", None))
        ends: list[float] = []  # per lane, where its last label ends
        placed = []
        for mark in sorted(marks, key=lambda m: m.x):
            width = svg.text_width(mark.text, 11)
            start = mark.x + 3 if mark.x + 3 + width <= WIDTH - 4 else mark.x - 3 - width
            lane = next((n for n, end in enumerate(ends) if start >= end + 8), len(ends))
            ends[lane:lane + 1] = [start + width]  # fmt: skip
            placed.append(_Mark(mark.x, mark.text, mark.event, lane))
        return placed

    def y(self, row: int) -> float:
        return float(self.top + ROW * row)

    def draw(self) -> ET.Element:
        s = self.status
        root = el(None, "svg", xmlns="http://www.w3.org/2000/svg", width=WIDTH,
                  height=self.height, viewBox=f"0 0 {WIDTH} {self.height}", font_family=FONT,
                  data_key=s.key, data_namespace=s.namespace, data_state=s.state.value,
                  data_fence=s.fence)  # fmt: skip
        el(root, "title", f"{s.key} ({s.namespace}): {s.state.value}, fence {s.fence}")
        self._defs(root)
        el(root, "rect", width=WIDTH, height=self.height, fill="#ffffff")
        self._head(root)
        self._axis(root)
        for row, attempt in enumerate(s.attempts):
            self._attempt(root, row, attempt)
        self._takeovers(root)
        for row, notice in enumerate(s.notices, start=len(s.attempts)):
            self._notice(root, row, notice)
        if self.loose:
            self._loose(root, self.rows - 1)
        if not self.rows:
            label(root, LEFT, self.y(0) + 28, "no attempts on record", right=WIDTH, fill=MUTED)
        self._marks(root)
        self._legend(root)
        return root

    def _defs(self, root: ET.Element) -> None:
        pattern = el(el(root, "defs"), "pattern", id="lapsed", width=8, height=8,
                     patternUnits="userSpaceOnUse", patternTransform="rotate(45)")  # fmt: skip
        el(pattern, "rect", width=8, height=8, fill="#fff3e0")
        el(pattern, "rect", width=3, height=8, fill=OUTCOME_COLOUR[AttemptOutcome.RUNNING])

    def _head(self, root: ET.Element) -> None:
        s, room = self.status, WIDTH - 32
        el(root, "text", _fit(s.key, room, 16), x=16, y=24, font_size=16.0, font_weight="bold")
        parts = [f"namespace {s.namespace}", s.state.value, f"fence {s.fence}"]
        if s.result_version:
            parts.append(f"result version {s.result_version}")
        el(root, "text", _fit(" · ".join(parts), room, 12), x=16, y=44, font_size=12.0)
        clock = f"store clock {_when(s.store_time)} UTC"
        if not self.now_shown:
            since = _span(timedelta(microseconds=_us(s.store_time) - self.last))
            clock += f", {since} after the last recorded time (off the axis)"
        el(root, "text", clock, x=16, y=62, font_size=12.0, fill=MUTED)

    def _axis(self, root: ET.Element) -> None:
        axis = el(root, "g", class_="axis")
        for row in range(1, max(self.rows, 1)):
            el(axis, "line", x1=8, x2=WIDTH - 8, y1=self.y(row), y2=self.y(row), stroke=RULE)
        for us, text in self.scale.ticks():
            x = self.scale.x(us)
            el(axis, "line", x1=x, x2=x, y1=self.top, y2=self.bottom + 5, stroke=GRID)
            el(axis, "text", text, class_="tick", x=x, y=self.bottom + 18, font_size=11.0,
               text_anchor="middle", fill=MUTED)  # fmt: skip
        el(axis, "line", x1=LEFT, x2=LEFT + PLOT, y1=self.bottom, y2=self.bottom, stroke=MUTED)
        start = datetime.fromtimestamp(self.scale.start / _US, tz=UTC)
        every = _span(timedelta(microseconds=self.scale.step()))
        caption = f"UTC on the store's clock, from {_when(start)}; a tick every {every}"
        label(axis, LEFT, self.bottom + 36, caption, right=WIDTH, size=11, fill=MUTED)

    def _row_label(self, parent: ET.Element, row: int, title: str, detail: str) -> None:
        y = self.y(row)
        title = title if len(title) <= 26 else title[:25] + "…"
        el(parent, "text", title, x=16, y=y + 20, font_size=13.0, font_weight="bold")
        detail = detail if len(detail) <= 28 else detail[:27] + "…"
        el(parent, "text", detail, x=16, y=y + 36, font_size=11.0, font_family=MONO, fill=MUTED)

    def _bar_label(self, parent: ET.Element, x0: float, x1: float, row: int, text: str) -> None:
        # Under the bar from its start; one too long for the room left ends with the bar.
        end = max(x1, LEFT + svg.text_width(text, 11.5))
        label(parent, x0, self.y(row) + 40, text, right=WIDTH - 4, end=end, size=11.5)

    def _attempt(self, root: ET.Element, row: int, a: AttemptInfo) -> None:
        s, y = self.status, self.y(row)
        mid = y + BAR_TOP + BAR_H / 2
        owner = s.owner if s.owner and s.owner.attempt_id == a.attempt_id else None
        end = a.ended_at or (owner.lease_expires_at if owner else s.store_time)
        lapsed = a.ended_at is None and (owner is None or owner.lease_left <= timedelta(0))
        x0 = self.scale.x(a.started_at)
        x1 = max(self.scale.x(end), x0 + 3)
        lease = None if a.ended_at else "ran-out" if lapsed else "live"
        group = titled(root, _attempt_title(a, owner is not None, lapsed), class_="attempt",
                       data_attempt=a.attempt_id, data_fence=a.fence,
                       data_outcome=a.outcome.value, data_outputs=len(a.outputs),
                       data_lease=lease)  # fmt: skip
        self._row_label(group, row, f"fence {a.fence}", a.attempt_id)
        colour = OUTCOME_COLOUR[a.outcome]
        fill: dict[str, object] = {"fill": colour}
        if lapsed:
            fill = {"fill": "url(#lapsed)", "stroke_dasharray": "4 3"}
        elif owner is not None:  # the lease still to run, lighter than the time already run
            fill |= {"fill_opacity": 0.35}
        el(group, "rect", class_=f"bar {a.outcome.value}", x=x0, y=y + BAR_TOP, width=x1 - x0,
           height=BAR_H, rx=3.0, stroke=colour, **fill)  # fmt: skip
        if owner is not None and not lapsed:
            ran = min(max(self.scale.x(s.store_time), x0), x1) - x0
            el(group, "rect", class_="elapsed", x=x0, y=y + BAR_TOP, width=ran, height=BAR_H,
               rx=3.0, fill=colour)  # fmt: skip
        self._bar_label(group, x0, x1, row, _attempt_label(a, owner))
        if owner is not None and lapsed and self.now_shown:  # dangling since the lease end
            now = self.scale.x(s.store_time)
            el(group, "line", class_="overdue", x1=x1, x2=now, y1=mid, y2=mid, stroke=colour,
               stroke_width=2.0, stroke_dasharray="1 4", stroke_linecap="round")  # fmt: skip
        if owner is not None:
            top, low = y + BAR_TOP - 4, y + BAR_TOP + BAR_H + 4
            _marker(group, "lease-end", f"the owner's lease ends {_when(end)} (its last heartbeat"
                    " set it)", svg.tick(x1, top, low, colour))  # fmt: skip
        if a.outcome is AttemptOutcome.SUCCEEDED and a.ended_at:
            _marker(group, "commit", f"commit at {_when(a.ended_at)}: the result of fence "
                    f"{a.fence}", svg.diamond(x1, mid, COMMIT))  # fmt: skip
        if a.outcome is AttemptOutcome.FENCED and a.ended_at:
            _marker(group, "fenced", f"fenced at {_when(a.ended_at)}: superseded while its lease"
                    " was live, no write of it can land", svg.cross(x1, mid, REFUSED))  # fmt: skip
        for e in s.events:  # those naming this attempt (what ``AttemptInfo.events`` holds)
            if e.kind != RESOLVED and (e.attempt_id, e.fence) == (a.attempt_id, a.fence):
                self._event(group, e, mid)

    def _event(self, parent: ET.Element, e: EventInfo, mid: float) -> None:
        x = self.scale.x(e.at)
        if e.kind == TOKEN_REFUSED:
            kind, what, shape = "refused", "completion token refused", svg.no_entry(x, mid, REFUSED)
        else:
            kind, what, shape = "event", e.kind, svg.dot(x, mid, MUTED)
        fields = (("attempt", e.attempt_id), ("fence", e.fence), ("reason", e.reason),
                  ("detail", e.detail), ("by", e.actor))  # fmt: skip
        words = [f"{what} at {_when(e.at)}"] + [f"{k} {v}" for k, v in fields if v is not None]
        _marker(parent, kind, "; ".join(words), shape)

    def _takeovers(self, root: ET.Element) -> None:
        attempts = self.status.attempts
        for row, (old, new) in enumerate(itertools.pairwise(attempts)):
            if old.outcome is not AttemptOutcome.EXPIRED:
                continue
            xa, xb = self.scale.x(old.ended_at or new.started_at), self.scale.x(new.started_at)
            ya, yb = self.y(row) + BAR_TOP + BAR_H, self.y(row + 1) + BAR_TOP + BAR_H / 2
            curve = f"M{svg.points((xa, ya))} C{svg.points((xa, yb), (xb - 14, yb), (xb - 7, yb))}"
            title = (
                f"takeover at {_when(new.started_at)}: attempt {new.attempt_id} (fence"
                f" {new.fence}) claimed the job once the lease of {old.attempt_id} ran out"
            )
            line = {"d": curve, "fill": "none", "stroke": TAKEOVER, "stroke_width": 1.5,
                    "stroke_dasharray": "3 2"}  # fmt: skip
            _marker(root, "takeover", title, [("path", line), *svg.triangle(xb, yb, TAKEOVER)])

    def _notice(self, root: ET.Element, row: int, n: NoticeInfo) -> None:
        y = self.y(row)
        mid = y + BAR_TOP + BAR_H / 2
        answer = " ".join(p for p in (n.outcome, n.detail) if p) or "none yet"
        title = (f"completion notice {n.id} for {n.watch}: reports {n.state.value} of fence "
                 f"{n.fence}; queued {_when(n.created_at)}; {n.status} {_when(n.settled_at)};"
                 f" {n.attempts} tries; last answer: {answer}")  # fmt: skip
        group = titled(root, title, class_="marker", data_kind="notice", data_status=n.status,
                       data_notice=n.id)  # fmt: skip
        self._row_label(group, row, f"notice {n.watch}", f"reports fence {n.fence}")
        colour = NOTICE_COLOUR.get(n.status, MUTED)
        x0 = self.scale.x(n.created_at)
        if n.settled_at is not None:
            x1, dash = self.scale.x(n.settled_at), None
        else:  # still pending: up to the store's clock, or the axis end
            x1 = self.scale.x(self.status.store_time) if self.now_shown else LEFT + PLOT
            dash = "4 3"
        el(group, "line", x1=x0, x2=x1, y1=mid, y2=mid, stroke=colour, stroke_width=2.0,
           stroke_dasharray=dash)  # fmt: skip
        svg.draw(group, svg.ring(x0, mid, colour))
        words = n.status
        if n.settled_at is not None:
            svg.draw(group, svg.disc(x1, mid, colour))
            words += f" after {_span(n.settled_at - n.created_at)}"
        words += f" · {n.attempts} {'try' if n.attempts == 1 else 'tries'}"
        words += f" · {n.outcome}" if n.outcome else ""
        self._bar_label(group, x0, x1, row, words)

    def _loose(self, root: ET.Element, row: int) -> None:
        group = el(root, "g", class_="events")
        self._row_label(group, row, "job events", f"{len(self.loose)} naming no attempt")
        for e in self.loose:
            self._event(group, e, self.y(row) + BAR_TOP + BAR_H / 2)

    def _marks(self, root: ET.Element) -> None:
        for mark in self.marks:
            y = HEAD + LANE * mark.lane + 11
            if mark.event is None:
                group = titled(root, f"store clock {_when(self.status.store_time)} UTC",
                               class_="marker", data_kind="now")  # fmt: skip
                colour, dash = MUTED, "2 3"
            else:
                group = titled(root, _resolution_title(mark.event), class_="marker",
                               data_kind="resolution", data_action=mark.event.detail)  # fmt: skip
                colour, dash = RESOLUTION, "6 3"
            svg.draw(group, svg.tick(mark.x, y + 3, self.bottom, colour, dash))
            label(group, mark.x + 3, y, mark.text, right=WIDTH - 4, end=mark.x - 3, size=11,
                  fill=colour)  # fmt: skip

    def _legend(self, root: ET.Element) -> None:
        legend = el(root, "g", class_="legend")
        x, y = 16.0, self.bottom + 62
        for outcome, colour in OUTCOME_COLOUR.items():
            el(legend, "rect", x=x, y=y - 10, width=14, height=12, rx=2.0, fill=colour)
            x = _legend_text(legend, x, y, outcome.value)
        running = OUTCOME_COLOUR[AttemptOutcome.RUNNING]
        el(legend, "rect", x=x, y=y - 10, width=14, height=12, fill="url(#lapsed)",
           stroke=running, stroke_dasharray="4 3")  # fmt: skip
        _legend_text(legend, x, y, "running, lease ran out")
        x, y = 16.0, y + 22
        for shapes, name in (
            (svg.diamond(0, 0, COMMIT), "commit"),
            (svg.triangle(4, 0, TAKEOVER), "takeover"),
            (svg.cross(0, 0, REFUSED), "fenced"),
            (svg.no_entry(0, 0, REFUSED), "refused token"),
            (svg.tick(0, -7, 7, MUTED), "lease end"),
            (svg.tick(0, -8, 6, RESOLUTION, "6 3"), "resolution"),
            (svg.ring(0, 0, NOTICE_COLOUR["delivered"]), "notice queued"),
            (svg.disc(0, 0, NOTICE_COLOUR["delivered"]), "notice settled"),
            (svg.dot(0, 0, MUTED), "other event"),
        ):
            svg.draw(el(legend, "g", transform=f"translate({x + 7:.1f},{y - 4:.1f})"), shapes)
            x = _legend_text(legend, x, y, name)


def _legend_text(legend: ET.Element, x: float, y: float, text: str) -> float:
    el(legend, "text", text, x=x + 19, y=y, font_size=11.0)
    return x + 19 + svg.text_width(text, 11) + 12


def _marker(parent: ET.Element, kind: str, title: str, shapes: list[svg.Shape]) -> None:
    svg.draw(titled(parent, title, class_="marker", data_kind=kind), shapes)


def _recorded(s: JobStatus) -> list[int]:
    """Every time the record holds: the axis spans them."""
    times = [_us(s.created_at)] + [_us(e.at) for e in s.events]
    times += [_us(at) for a in s.attempts for at in (a.started_at, a.ended_at) if at]
    times += [_us(at) for n in s.notices for at in (n.created_at, n.settled_at) if at]
    return times + ([_us(s.owner.lease_expires_at)] if s.owner else [])


# -- words ------------------------------------------------------------------------------------


def _attempt_label(a: AttemptInfo, owner: OwnerInfo | None) -> str:
    if a.ended_at is not None:
        words = f"{a.outcome.value} · {_span(a.ended_at - a.started_at)}"
    elif owner is None:
        words = "running · no lease on record"
    elif owner.lease_left > timedelta(0):
        words = f"running · lease {_span(owner.lease_left)} left"
    else:
        words = f"running · lease ran out {_span(-owner.lease_left)} ago: dangling"
    if a.error is not None:
        words += f" · {a.error.type}"
    if a.outputs:
        committed = sum(1 for o in a.outputs if o.committed)
        noun = "output" if len(a.outputs) == 1 else "outputs"
        words += f" · {len(a.outputs)} {noun} ({committed} committed)"
    return words


def _attempt_title(a: AttemptInfo, owns: bool, lapsed: bool) -> str:
    lines = [
        f"attempt {a.attempt_id}, fence {a.fence}: {a.outcome.value}",
        f"started {_when(a.started_at)}, ended {_when(a.ended_at)} (UTC)",
    ]
    if owns:
        lines.append("the current owner; its lease " + ("ran out" if lapsed else "is live"))
    if a.error is not None:
        kind = "retryable" if a.error.retryable else "terminal"
        lines.append(f"error {a.error.type}: {a.error.message} ({kind})")
    for o in a.outputs:
        lines.append(f"output {o.name} ({'committed' if o.committed else 'uncommitted'}) {o.uri}")
    return "\n".join(lines)


def _resolution_label(e: EventInfo) -> str:
    return _fit(f"{e.detail or 'resolved'} by {e.actor or 'unknown'}", 300, 11)


def _resolution_title(e: EventInfo) -> str:
    data = e.data or {}
    before = data.get("before") or {}
    lines = [f"resolved: {e.detail} at {_when(e.at)} UTC by {e.actor}", f"reason: {e.reason}"]
    if before:
        lines.append(f"before: {before.get('state')} at fence {before.get('fence')}")
    lines.append(f"fence set to {e.fence}" + (", forced" if data.get("force") else ""))
    return "\n".join(lines)

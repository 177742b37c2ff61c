"""A whole drill as one SVG picture: the faults on the executors, their store links, the
store and the engine, over every task's life, on one time axis (seconds from the start).

Each task is a thin row: grey while waiting (READY, FAILED before a retry), blue while
RUNNING, a green mark at its SUCCEED, red from its last change on if it never got there. A
fault is a band on its lane (a killed or stopped process, a black-holed or slowed link, a
store down) or a tick (a reset, an engine-side fault), and a mark on each task it hit.
Hovering shows what each one is.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..testing.drill import DrillRecord, DrillResult, FaultKind, Injected
from ..testing.rillflow import TaskStatus, TaskView
from . import _svg as svg

__all__ = ["drill_svg"]

WIDTH, LEFT, RIGHT, TOP = 1200.0, 210.0, 20.0, 56.0
LANE, ROW = 18.0, 5.0
COLOURS = {
    FaultKind.KILL: "#cf222e",
    FaultKind.STOP: "#bf8700",
    FaultKind.RESET: "#8250df",
    FaultKind.BLACKHOLE: "#1f2328",
    FaultKind.LATENCY: "#d4a72c",
    FaultKind.DUP: "#0969da",
    FaultKind.REDO: "#1a7f37",
    FaultKind.TIMEOUT: "#bc4c00",
    FaultKind.LOST_CALLBACK: "#cf222e",
    FaultKind.REFUSED_CALLBACK: "#953800",
    FaultKind.STORE_RESTART: "#6e7781",
}
RUNNING, SUCCEED, WAITING = "#54aeff", "#1a7f37", "#d0d7de"


class _Axis:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.span = start, max(end - start, 1e-3)

    def x(self, at: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * min(max(at - self.start, 0.0), self.span) / self.span


def _lane(fault: Injected, processes: int) -> int:
    """0..n-1: executors; n..2n-1: their store links; 2n: the store; 2n+1: the engine."""
    if fault.kind.on_process or fault.kind.on_store_link:
        index = next((int(w) for w in fault.target.split() if w.isdigit()), 0)
        return index + (processes if fault.kind.on_store_link else 0)
    return 2 * processes if fault.kind is FaultKind.STORE_RESTART else 2 * processes + 1


def _fault(parent: ET.Element, fault: Injected, axis: _Axis, y: float, end: float) -> None:
    colour = COLOURS[fault.kind]
    title = f"{fault.offset:.1f} s {fault.kind.value} {fault.target}"
    if fault.until is not None and fault.until > fault.at:
        title += f" for {fault.until - fault.at:.1f} s"
    title += f"; hit {len(fault.affected)} task(s)"
    if fault.skipped:
        title += f" (nothing hit: {fault.skipped})"
    group = svg.titled(parent, title, class_=f"fault {fault.kind.value}")
    x0 = axis.x(fault.at)
    if fault.until is not None and fault.until > fault.at:
        x1 = max(axis.x(min(fault.until, end)), x0 + 2)
        svg.el(group, "rect", x=x0, y=y + 3, width=x1 - x0, height=LANE - 6, fill=colour,
               fill_opacity=0.35 if fault.skipped else 0.8)  # fmt: skip
    else:
        svg.draw(group, svg.tick(x0, y + 2, y + LANE - 2, colour, "2 2" if fault.skipped else None))


def _task(parent: ET.Element, view: TaskView, axis: _Axis, y: float, end: float) -> None:
    history = list(view.history)
    final = "SUCCEED" if view.status is TaskStatus.SUCCEED else f"{view.status.value} at the end"
    title = f"{view.execution_id}/{view.name}: {final}, {view.attempts} dispatch(es)"
    group = svg.titled(parent, title, class_="task")
    for here, after in zip(history, [*history[1:], None], strict=True):
        x0 = axis.x(here.at)
        if here.status is TaskStatus.SUCCEED:  # a mark; the row is empty until a redo
            svg.el(group, "rect", x=x0, y=y - 1, width=3.0, height=ROW + 1, fill=SUCCEED)
            continue
        colour = RUNNING if here.status is TaskStatus.RUNNING else WAITING
        if after is None:
            colour = "#cf222e"  # never got to SUCCEED
        x1 = axis.x(end if after is None else after.at)
        if x1 - x0 >= 0.3:
            svg.el(group, "rect", x=x0, y=y, width=x1 - x0, height=ROW - 1, fill=colour)


def drill_svg(record: DrillRecord, result: DrillResult) -> str:
    """The picture of a drill (see the module's docs)."""
    n = record.processes
    lanes = [f"executor {i}" for i in range(n)] + [f"store link {i}" for i in range(n)]
    lanes += ["store", "engine"]
    tasks = sorted(record.tasks.values(), key=lambda v: v.history[0].at if v.history else 0.0)
    height = TOP + LANE * len(lanes) + 24 + ROW * len(tasks) + 56
    axis = _Axis(record.started, record.quiet)
    root = svg.el(None, "svg", xmlns="http://www.w3.org/2000/svg", width=WIDTH, height=height,
                  viewBox=f"0 0 {WIDTH:.0f} {height:.0f}", font_family="sans-serif")  # fmt: skip
    svg.el(root, "rect", x=0, y=0, width=WIDTH, height=height, fill="#ffffff")
    verdict = (
        "every check holds"
        if result.ok
        else "checks FAILED: " + ", ".join(c.name for c in result.checks if not c.ok)
    )
    heading = (
        f"drill seed {record.seed}: {n} executors, {result.tasks} tasks, "
        f"{len(record.faults)} faults, {result.duration:.0f} s + {result.settled:.0f} s to settle"
        f" — {verdict}"
    )
    svg.label(root, 10, 20, heading, right=WIDTH - RIGHT, size=13.0, font_weight="bold")
    bottom = height - 44
    for second in range(0, int(axis.span) + 1, max(1, int(axis.span // 12) or 1)):
        x = axis.x(record.started + second)
        svg.el(root, "line", x1=x, x2=x, y1=TOP - 8, y2=bottom, stroke="#eaeef2")
        svg.el(root, "text", f"{second} s", x=x, y=TOP - 12, font_size=10.0, fill="#57606a",
               text_anchor="middle")  # fmt: skip
    x_end = axis.x(record.ended)
    svg.draw(root, svg.tick(x_end, TOP - 8, bottom, "#57606a", "6 3"))
    svg.label(root, x_end + 4, bottom + 14, "injection ends", right=WIDTH - RIGHT, size=10.0)
    for i, name in enumerate(lanes):
        y = TOP + LANE * i
        svg.el(root, "text", name, x=10, y=y + LANE - 5, font_size=11.0, fill=svg.INK)
        svg.el(root, "line", x1=LEFT, x2=WIDTH - RIGHT, y1=y + LANE, y2=y + LANE,
               stroke="#eaeef2")  # fmt: skip
    faults = svg.el(root, "g", class_="faults")
    for fault in record.faults:
        _fault(faults, fault, axis, TOP + LANE * _lane(fault, n), record.quiet)
    first = TOP + LANE * len(lanes) + 24
    svg.el(root, "text", f"tasks ({len(tasks)})", x=10, y=first - 6, font_size=11.0,
           fill=svg.INK)  # fmt: skip
    rows = svg.el(root, "g", class_="tasks")
    where = {(v.execution_id, v.name): first + ROW * i for i, v in enumerate(tasks)}
    for view in tasks:
        _task(rows, view, axis, where[(view.execution_id, view.name)], record.quiet)
    hits = svg.el(root, "g", class_="hits")
    for fault in record.faults:
        for task in fault.affected:
            if task in where:
                x = axis.x(fault.at)
                svg.el(hits, "rect", x=x - 1, y=where[task] - 1, width=2.5, height=ROW + 1,
                       fill=COLOURS[fault.kind])  # fmt: skip
    _legend(root, height - 10)
    return svg.serialise(root)


def _legend(root: ET.Element, y: float) -> None:
    x = 10.0
    for name, colour in [("running", RUNNING), ("waiting", WAITING), ("succeed", SUCCEED),
                         ("never succeeded", "#cf222e")]:  # fmt: skip
        svg.el(root, "rect", x=x, y=y - 8, width=10.0, height=8.0, fill=colour)
        svg.el(root, "text", name, x=x + 14, y=y, font_size=10.0, fill=svg.INK)
        x += 24 + svg.text_width(name, 10.0)
    for kind, colour in COLOURS.items():
        svg.el(root, "rect", x=x, y=y - 8, width=4.0, height=8.0, fill=colour)
        svg.el(root, "text", kind.value, x=x + 7, y=y, font_size=10.0, fill=svg.INK)
        x += 16 + svg.text_width(kind.value, 10.0)

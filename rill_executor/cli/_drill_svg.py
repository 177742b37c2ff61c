"""A whole drill as one SVG picture: the faults on the executors, their store links, the
store and the engine, over every task's life, on one time axis (seconds from the start).

Each task is a thin row: a thin grey line while waiting (READY, FAILED before a retry), a
blue bar while RUNNING, a green notch at its SUCCEED, yellow and black stripes from its last
change on if it never got there. A fault is its kind's mark on its lane, over a band while
it lasts (a killed or stopped process, a black-holed or slowed link, a store down), and the
same mark on each task it hit. Every fault kind and every state has a colour and a shape of
its own, so that a raster copy of the picture still tells them apart; the legend shows them
all. Hovering shows the details.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..testing.drill import DrillRecord, DrillResult, FaultKind, Injected
from ..testing.rillflow import TaskStatus, TaskView
from . import _svg as svg

__all__ = ["drill_svg"]

WIDTH, LEFT, RIGHT, TOP = 1200.0, 210.0, 20.0, 56.0
LANE, ROW = 18.0, 6.0
COLOURS = {  # one hue each, none a state's
    FaultKind.KILL: "#d60000",
    FaultKind.STOP: "#ff9a1f",
    FaultKind.RESET: "#8c3bff",
    FaultKind.BLACKHOLE: "#000000",
    FaultKind.LATENCY: "#a17569",
    FaultKind.DUP: "#0000dd",
    FaultKind.REDO: "#00acc6",
    FaultKind.TIMEOUT: "#573b00",
    FaultKind.LOST_CALLBACK: "#ff7ed1",
    FaultKind.REFUSED_CALLBACK: "#bf03b8",
    FaultKind.STORE_RESTART: "#005659",
}
SHAPES = {
    FaultKind.KILL: "cross",
    FaultKind.STOP: "square",
    FaultKind.RESET: "triangle-down",
    FaultKind.BLACKHOLE: "disc",
    FaultKind.LATENCY: "hourglass",
    FaultKind.DUP: "plus",
    FaultKind.REDO: "ring",
    FaultKind.TIMEOUT: "triangle-up",
    FaultKind.LOST_CALLBACK: "diamond",
    FaultKind.REFUSED_CALLBACK: "star",
    FaultKind.STORE_RESTART: "hexagon",
}
RUNNING, SUCCEED, WAITING, NEVER = "#54aeff", "#1a7f37", "#afb8c1", "#f5c400"
STATES = {  # name: (colour, shape) of a task's row
    "waiting": (WAITING, "line"),
    "running": (RUNNING, "bar"),
    "succeed": (SUCCEED, "notch"),
    "never succeeded": (NEVER, "stripes"),
}


def _polygon(x: float, y: float, r: float, corners: list[tuple[float, float]]) -> str:
    return "M" + svg.points(*[(x + r * cx, y + r * cy) for cx, cy in corners]) + " Z"


_OUTLINES = {  # unit outlines of the filled marks
    "square": [(-0.8, -0.8), (0.8, -0.8), (0.8, 0.8), (-0.8, 0.8)],
    "triangle-down": [(-1.0, -0.8), (1.0, -0.8), (0.0, 0.9)],
    "triangle-up": [(-1.0, 0.8), (1.0, 0.8), (0.0, -0.9)],
    "hourglass": [(-0.9, -0.9), (0.9, -0.9), (-0.9, 0.9), (0.9, 0.9)],
    "diamond": [(0.0, -1.0), (1.0, 0.0), (0.0, 1.0), (-1.0, 0.0)],
    "star": [(0.0, -1.0), (0.24, -0.31), (0.95, -0.31), (0.38, 0.12), (0.59, 0.81),
             (0.0, 0.38), (-0.59, 0.81), (-0.38, 0.12), (-0.95, -0.31), (-0.24, -0.31)],
    "hexagon": [(-0.5, -0.87), (0.5, -0.87), (1.0, 0.0), (0.5, 0.87), (-0.5, 0.87), (-1.0, 0.0)],
}  # fmt: skip


def mark(kind: FaultKind, x: float, y: float, r: float, opacity: float = 1.0) -> list[svg.Shape]:
    """The mark of a fault ``kind`` centred on (x, y), ``r`` its half-width."""
    colour, shape = COLOURS[kind], SHAPES[kind]
    r *= {"star": 1.3, "hourglass": 1.1}.get(shape, 1.0)  # thin outlines: as legible as the rest
    common = {"class_": f"mark {shape}", "opacity": opacity if opacity < 1 else None}
    stroke = {"stroke": colour, "stroke_width": max(1.5, r / 2.5), "stroke_linecap": "round"}
    if shape == "cross":
        d = f"M{svg.points((x - r, y - r))} L{svg.points((x + r, y + r))}"
        d += f" M{svg.points((x - r, y + r))} L{svg.points((x + r, y - r))}"
        return [("path", {"d": d, **stroke, **common})]
    if shape == "plus":
        d = f"M{svg.points((x - r, y))} L{svg.points((x + r, y))}"
        d += f" M{svg.points((x, y - r))} L{svg.points((x, y + r))}"
        return [("path", {"d": d, **stroke, **common})]
    if shape == "ring":
        return [("circle", {"cx": x, "cy": y, "r": r * 0.8, "fill": "#ffffff", **stroke,
                            **common})]  # fmt: skip
    if shape == "disc":
        return [("circle", {"cx": x, "cy": y, "r": r, "fill": colour, **common})]
    d = _polygon(x, y, r, _OUTLINES[shape])
    return [("path", {"d": d, "fill": colour, "stroke": "#ffffff", "stroke_width": 0.5,
                      **common})]  # fmt: skip


def _stripes(root: ET.Element) -> None:
    """The pattern of a task that never succeeded: yellow and black stripes."""
    defs = svg.el(root, "defs")
    pattern = svg.el(defs, "pattern", id="never", width=6.0, height=6.0,
                     patternUnits="userSpaceOnUse", patternTransform="rotate(45)")  # fmt: skip
    svg.el(pattern, "rect", x=0, y=0, width=6.0, height=6.0, fill=NEVER)
    svg.el(pattern, "rect", x=0, y=0, width=2.5, height=6.0, fill="#1f2328")


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
        svg.el(group, "rect", x=x0, y=y + 5, width=x1 - x0, height=LANE - 10, fill=colour,
               fill_opacity=0.2 if fault.skipped else 0.45)  # fmt: skip
    svg.draw(group, mark(fault.kind, x0, y + LANE / 2, 5.0, 0.35 if fault.skipped else 1.0))


def _task(parent: ET.Element, view: TaskView, axis: _Axis, y: float, end: float) -> None:
    history = list(view.history)
    final = "SUCCEED" if view.status is TaskStatus.SUCCEED else f"{view.status.value} at the end"
    title = f"{view.execution_id}/{view.name}: {final}, {view.attempts} dispatch(es)"
    group = svg.titled(parent, title, class_="task")
    for here, after in zip(history, [*history[1:], None], strict=True):
        x0 = axis.x(here.at)
        if here.status is TaskStatus.SUCCEED:  # a notch; the row is empty until a redo
            svg.el(group, "rect", x=x0 - 1, y=y - 1.5, width=3.0, height=ROW + 2,
                   fill=SUCCEED, class_="succeed")  # fmt: skip
            continue
        x1 = axis.x(end if after is None else after.at)
        if x1 - x0 < 0.3:
            continue
        if after is None:  # never got to SUCCEED
            svg.el(group, "rect", x=x0, y=y - 0.5, width=x1 - x0, height=ROW,
                   fill="url(#never)", class_="never")  # fmt: skip
        elif here.status is TaskStatus.RUNNING:
            svg.el(group, "rect", x=x0, y=y, width=x1 - x0, height=ROW - 1, fill=RUNNING,
                   class_="running")  # fmt: skip
        else:
            svg.el(group, "rect", x=x0, y=y + ROW / 2 - 1, width=x1 - x0, height=1.5,
                   fill=WAITING, class_="waiting")  # fmt: skip


def drill_svg(record: DrillRecord, result: DrillResult) -> str:
    """The picture of a drill (see the module's docs)."""
    n = record.processes
    lanes = [f"executor {i}" for i in range(n)] + [f"store link {i}" for i in range(n)]
    lanes += ["store", "engine"]
    tasks = sorted(record.tasks.values(), key=lambda v: v.history[0].at if v.history else 0.0)
    height = TOP + LANE * len(lanes) + 24 + ROW * len(tasks) + 76
    axis = _Axis(record.started, record.quiet)
    root = svg.el(None, "svg", xmlns="http://www.w3.org/2000/svg", width=WIDTH, height=height,
                  viewBox=f"0 0 {WIDTH:.0f} {height:.0f}", font_family="sans-serif")  # fmt: skip
    svg.el(root, "rect", x=0, y=0, width=WIDTH, height=height, fill="#ffffff")
    _stripes(root)
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
    bottom = height - 64
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
                group = svg.el(hits, "g", class_=f"hit {fault.kind.value}")
                svg.draw(group, mark(fault.kind, axis.x(fault.at), where[task] + ROW / 2, 4.0))
    _legend(root, height - 30)
    return svg.serialise(root)


def _legend(root: ET.Element, y: float) -> None:
    """Two lines: the task states, then the fault kinds, each with its colour and shape."""
    svg.el(root, "text", "tasks:", x=10, y=y, font_size=10.0, fill=svg.INK)
    x = 52.0
    for name, (colour, shape) in STATES.items():
        group = svg.el(root, "g", class_=f"legend state {shape}")
        fill = "url(#never)" if shape == "stripes" else colour
        top, high = {"line": (y - 4.5, 1.5), "notch": (y - 10, 11.0)}.get(shape, (y - 8, 7.0))
        width = 3.0 if shape == "notch" else 18.0
        svg.el(group, "rect", x=x, y=top, width=width, height=high, fill=fill, class_=shape)
        svg.el(group, "text", name, x=x + width + 4, y=y, font_size=10.0, fill=svg.INK)
        x += width + 16 + svg.text_width(name, 10.0)
    y += 18
    svg.el(root, "text", "faults:", x=10, y=y, font_size=10.0, fill=svg.INK)
    x = 52.0
    for kind in COLOURS:
        group = svg.el(root, "g", class_=f"legend fault {kind.value}")
        svg.draw(group, mark(kind, x + 5, y - 4, 5.0))
        svg.el(group, "text", kind.value, x=x + 13, y=y, font_size=10.0, fill=svg.INK)
        x += 24 + svg.text_width(kind.value, 10.0)

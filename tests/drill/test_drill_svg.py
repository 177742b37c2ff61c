"""The drill's picture: every fault kind and every task state has a colour and a shape of
its own (a raster copy loses the hover titles), shown in the legend and used where drawn."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rill_executor.cli._drill_svg import drill_svg
from rill_executor.testing.drill import DrillRecord, FaultKind, Injected, Watched, summarise
from rill_executor.testing.rillflow import TaskStatus, TaskView, Transition

HELD = {FaultKind.KILL, FaultKind.STOP, FaultKind.BLACKHOLE, FaultKind.LATENCY}


def _every_kind() -> DrillRecord:
    """One fault of each kind, each hitting a task of its own; every fourth task never
    succeeds."""
    t0 = 1000.0
    tasks, watched, faults = {}, [], []
    for i, kind in enumerate(FaultKind):
        name, start = f"t{i}", t0 + 1 + 2 * i
        history = [
            Transition(start, TaskStatus.READY, ""),
            Transition(start + 0.5, TaskStatus.RUNNING, ""),
        ]
        if i % 4 != 3:
            history.append(Transition(start + 4, TaskStatus.SUCCEED, ""))
        status = history[-1].status
        tasks[("e", name)] = TaskView("e", name, status, {}, 1, None, tuple(history))
        watched.append(Watched("e", name, name))
        target = "executor 0" if kind.on_process or kind.on_store_link else f"e/{name}"
        faults.append(
            Injected(start + 1, 1.0 + 2 * i, kind, target, start + 3 if kind in HELD else None,
                     [("e", name)])
        )  # fmt: skip
    return DrillRecord(1, t0, t0 + 26, t0 + 30, True, 1, None, watched, faults, tasks, [], [])


def _look(element: ET.Element) -> tuple[str, str]:
    """(colour, shape) of a mark or a state's swatch."""
    drawn = next(
        e
        for e in element.iter()
        if "class" in e.attrib and e.tag.endswith(("path", "circle", "rect"))
    )
    fill = drawn.get("fill")
    colour = drawn.get("stroke") if fill in {None, "#ffffff"} else fill
    return str(colour), drawn.attrib["class"].removeprefix("mark ")


def test_each_fault_kind_and_each_state_has_a_colour_and_a_shape_of_its_own() -> None:
    record = _every_kind()
    root = ET.fromstring(drill_svg(record, summarise(record, [])))
    groups = list(root.iter("{http://www.w3.org/2000/svg}g"))
    legend = {
        g.attrib["class"].split()[-1]: _look(g)
        for g in groups
        if g.get("class", "").startswith("legend")
    }
    kinds = {k.value for k in FaultKind}
    assert kinds <= set(legend) and len(legend) == len(kinds) + 4  # and the 4 states
    assert len({colour for colour, _ in legend.values()}) == len(legend)
    assert len({shape for _, shape in legend.values()}) == len(legend)
    for g in groups:  # a fault on its lane and on the task it hit: its kind's look
        found = g.get("class", "").split()
        if found[:1] in (["fault"], ["hit"]):
            assert _look(g) == legend[found[1]], found
    rows = {e.get("class") for g in groups if g.get("class") == "task" for e in g}
    assert {"waiting", "running", "succeed", "never"} <= rows

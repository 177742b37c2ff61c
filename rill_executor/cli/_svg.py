"""A small kit for writing SVG with the standard library's ElementTree.

Elements take keyword attributes (``stroke_width`` is written ``stroke-width``, ``class_``
``class``; floats with one decimal, so the same picture is the same text), text is kept
valid XML, labels stay inside the picture, and the markers' shapes are plain data.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

__all__ = [
    "Shape",
    "cross",
    "diamond",
    "disc",
    "dot",
    "draw",
    "el",
    "label",
    "no_entry",
    "points",
    "ring",
    "serialise",
    "text_width",
    "tick",
    "titled",
    "triangle",
]

Shape = tuple[str, dict[str, object]]  # a tag and its attributes, drawn by ``draw``
INK = "#1f2328"
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    # XML 1.0 cannot carry most control characters, UTF-8 no lone surrogate, and a C1
    # control would reach a terminal the picture is printed on; a reason might hold one.
    return _NOT_XML.sub("\ufffd", text)


def _value(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, float) else _clean(str(value))


def _name(name: str) -> str:
    return name.rstrip("_").replace("_", "-")


def el(
    parent: ET.Element | None, tag: str, text: str | None = None, /, **attrs: object
) -> ET.Element:
    """A new element (under ``parent``, or a root when None)."""
    values = {_name(k): _value(v) for k, v in attrs.items() if v is not None}
    found = ET.Element(tag, values) if parent is None else ET.SubElement(parent, tag, values)
    if text is not None:
        found.text = _clean(text)
    return found


def titled(parent: ET.Element, title: str, **attrs: object) -> ET.Element:
    """A group with a ``<title>``: what a browser shows when the pointer rests on it."""
    found = el(parent, "g", **attrs)
    el(found, "title", title)
    return found


def serialise(root: ET.Element) -> str:
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def text_width(text: str, size: float) -> float:
    """A generous estimate of a text's width, enough to keep labels apart."""
    return len(text) * size * 0.6


def label(
    parent: ET.Element,
    x: float,
    y: float,
    text: str,
    *,
    right: float,
    end: float | None = None,
    size: float = 12.0,
    **attrs: object,
) -> ET.Element:
    """A text starting at ``x``; one that would cross ``right`` ends at ``end`` instead
    (default ``right``)."""
    if x + text_width(text, size) > right:
        x, attrs = right if end is None else end, attrs | {"text_anchor": "end"}
    return el(
        parent, "text", text, x=float(x), y=float(y), font_size=size, **({"fill": INK} | attrs)
    )


def draw(parent: ET.Element, shapes: list[Shape]) -> None:
    for tag, attrs in shapes:
        el(parent, tag, **attrs)


def points(*at: tuple[float, float]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in at)


def diamond(x: float, y: float, colour: str) -> list[Shape]:
    d = f"M{points((x, y - 7), (x + 7, y), (x, y + 7), (x - 7, y))} Z"
    return [("path", {"d": d, "fill": colour, "stroke": "#ffffff", "stroke_width": 1.5})]


def cross(x: float, y: float, colour: str) -> list[Shape]:
    d = f"M{points((x - 6, y - 6))} L{points((x + 6, y + 6))}"
    d += f" M{points((x - 6, y + 6))} L{points((x + 6, y - 6))}"
    return [("path", {"d": d, "stroke": colour, "stroke_width": 3.0, "stroke_linecap": "round"})]


def no_entry(x: float, y: float, colour: str) -> list[Shape]:
    return [
        ("circle", {"cx": x, "cy": y, "r": 6.0, "fill": "#ffffff", "stroke": colour,
                    "stroke_width": 2.0}),
        ("path", {"d": f"M{points((x - 4, y + 4))} L{points((x + 4, y - 4))}", "stroke": colour,
                  "stroke_width": 2.0}),
    ]  # fmt: skip


def triangle(x: float, y: float, colour: str) -> list[Shape]:
    """Pointing right, its tip at (x, y)."""
    return [("path", {"d": f"M{points((x - 8, y - 5), (x, y), (x - 8, y + 5))} Z", "fill": colour})]


def tick(x: float, y0: float, y1: float, colour: str, dash: str | None = None) -> list[Shape]:
    line = {"x1": x, "x2": x, "y1": y0, "y2": y1, "stroke": colour, "stroke_width": 2.0}
    return [("line", line | ({"stroke_dasharray": dash} if dash else {}))]


def ring(x: float, y: float, colour: str) -> list[Shape]:
    return [("circle", {"cx": x, "cy": y, "r": 5.0, "fill": "#ffffff", "stroke": colour,
                        "stroke_width": 2.0})]  # fmt: skip


def disc(x: float, y: float, colour: str) -> list[Shape]:
    return [("circle", {"cx": x, "cy": y, "r": 5.0, "fill": colour})]


def dot(x: float, y: float, colour: str) -> list[Shape]:
    return [("circle", {"cx": x, "cy": y, "r": 4.0, "fill": colour})]

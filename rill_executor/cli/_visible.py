"""Stored text on an operator's terminal: shown, never obeyed.

Keys, error messages, reasons, actors and event details come from dispatches and handlers,
so from anyone who can reach an executor. Printed raw, an escape sequence in one (CSI, OSC:
a hyperlink, a new window title), a C0 or C1 control, a bidi override or isolate, or a
zero-width character would act on the terminal or hide and reorder what the operator reads.
So every character Python does not call printable (categories Cc, Cf, Cs, Co, Cn, Zl, Zp
and Zs but the space) is written as its Python escape (``\\x1b``, ``\\u202e``,
``\\U000e0041``), and rich's markup and emoji codes are off: a key ``[bold]a[/]`` is shown
as it is. ``-o json`` keeps every string exact: there the same characters are JSON ``\\u``
escapes, which read back as the text itself.

``VisibleConsole`` is the one console the CLI prints with: every string and ``Text`` it is
given passes through ``render_str`` or ``render``, where it is made visible.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

__all__ = ["VisibleConsole", "visible", "visible_json", "visible_text"]


def _escaped(char: str) -> str:
    return repr(char)[1:-1]  # an unprintable character's repr is its escape


def visible(text: str) -> str:
    """``text`` with every character that is not printable (but the space) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def _json_escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells a character above U+FFFF
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible_json(text: str) -> str:
    """JSON text with every unprintable character a ``\\u`` escape: the same JSON value.

    Outside its strings JSON text has only printable ASCII, spaces and line breaks, so an
    unprintable character other than a line break is always inside a string."""
    if text.replace("\n", "").isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else _json_escaped(c) for c in text)


def visible_text(text: Text) -> Text:
    """A ``Text`` made visible, its styles kept on the characters they covered."""
    plain = text.plain
    if plain.isprintable():
        return text
    starts, pieces, at = [], [], 0
    for char in plain:
        starts.append(at)
        piece = char if char.isprintable() else _escaped(char)
        pieces.append(piece)
        at += len(piece)
    starts.append(at)
    shown = text.blank_copy("".join(pieces))
    for span in text.spans:
        shown.stylize(span.style, starts[span.start], starts[min(span.end, len(plain))])
    return shown


class VisibleConsole(Console):
    """A rich console that shows stored text visibly, without markup or emoji codes."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        options.update(markup=False, emoji=False)
        return super().render_str(visible(text), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            renderable = visible_text(renderable)
        return super().render(renderable, options)

"""Input and output mappings: the engine's JSONPath rules over ``context``, ``input``, ``output``.

As ``JSONPathInputOutputMapping`` applies them: rules run in order over
``{"context": …, "input": …, "output": …}``; a source that does not start with ``$`` is a
literal (JSON object or array, ``true``/``false``, a number, else the string); a missing
value (``None``) is not written; ``$.tasks.{T}.trigger_url`` is the callback URL of task T.
Paths are the subset descriptors use: ``$.a.b``, ``$.a['b']``, ``$.a[0]``, and in sources
the wildcard ``[*]`` (``$.output.sub_context.[*].x`` collects ``x`` of every element).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rill_executor import ConfigError

__all__ = ["Rule", "apply", "compile_path", "get", "parse_rules"]

ROOTS = frozenset({"context", "input", "output"})
_WILDCARD = "*"
_SEGMENT = re.compile(r"\[(\*|\d+|'[^']*'|\"[^\"]*\")\]|\.(\*|[^.\[\]]+)")

Segment = str | int


def compile_path(path: Any, *, where: str, wildcard: bool = True) -> tuple[Segment, ...]:
    """``path`` as segments (names, indexes, ``"*"``); ``ConfigError`` naming ``where`` if not."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise ConfigError(f"{where}: a path starts with '$', got {path!r}")
    segments: list[Segment] = []
    position = 1
    rest = path.replace(".[", "[")
    while position < len(rest):
        match = _SEGMENT.match(rest, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{where}: unsupported JSONPath {path!r}")
        token = match.group(1) or match.group(2)
        if token == _WILDCARD:
            if not wildcard:
                raise ConfigError(f"{where}: a target cannot hold a wildcard, got {path!r}")
            segments.append(_WILDCARD)
        elif token.isdigit() and match.group(1) is not None:
            segments.append(int(token))
        else:
            segments.append(token.strip("'\""))
        position = match.end()
    if len(segments) < 2 or segments[0] not in ROOTS:
        raise ConfigError(
            f"{where}: a path names a key under $.context, $.input or $.output, got {path!r}"
        )
    return tuple(segments)


def get(value: Any, segments: Sequence[Segment]) -> Any:
    """The value at ``segments`` (``None`` when missing); a wildcard collects a list."""
    for position, segment in enumerate(segments):
        if segment == _WILDCARD:
            if not isinstance(value, list | Mapping):
                return None
            items = value.values() if isinstance(value, Mapping) else value
            return [get(item, segments[position + 1 :]) for item in items]
        if isinstance(segment, int):
            if not isinstance(value, list) or segment >= len(value):
                return None
            value = value[segment]
        elif isinstance(value, Mapping):
            value = value.get(segment)
        else:
            return None
    return value


def _set(root: dict[str, Any], segments: Sequence[Segment], value: Any) -> None:
    current: Any = root
    for segment, following in itertools.pairwise(segments):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(segment, int):
            current.extend([None] * (segment + 1 - len(current)))
            if not isinstance(current[segment], list | dict):
                current[segment] = empty
        elif not isinstance(current.get(segment), list | dict):
            current[segment] = empty
        current = current[segment]
    last = segments[-1]
    if isinstance(last, int):
        current.extend([None] * (last + 1 - len(current)))
    current[last] = value


def delete(root: dict[str, Any], segments: Sequence[Segment]) -> None:
    """Remove the value at ``segments``, if there is one."""
    parent = get(root, segments[:-1])
    if isinstance(parent, dict):
        parent.pop(segments[-1], None)


def _literal(source: str) -> Any:
    # parseSource: a JSON object or array, a boolean, a number, else the string itself.
    text = source.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        return parsed
    if text.lower() in {"true", "false"}:
        return text.lower() == "true"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return source


@dataclass(frozen=True)
class Rule:
    """One mapping: ``source`` (a path, a literal or a task's trigger URL) to ``target``."""

    source: str
    target: str
    source_path: tuple[Segment, ...] | None
    target_path: tuple[Segment, ...]

    def value(self, scope: Mapping[str, Any], trigger_url: Callable[[str], str]) -> Any:
        if self.source.startswith("$.tasks."):
            parts = self.source.split(".")
            name, key = parts[2], parts[3]
            if key != "trigger_url" and not key.startswith("trigger_url?"):
                return None
            query = self.source.split("?", 1)
            return trigger_url(name) + (f"&{query[1]}" if len(query) > 1 else "")
        if self.source_path is None:
            return _literal(self.source)
        return get(scope, self.source_path)


def parse_rules(raw: Any, *, where: str) -> tuple[Rule, ...]:
    """A descriptor's ``inputMappings``/``outputMappings`` list, checked."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of mappings, got {raw!r}")
    rules = []
    for number, item in enumerate(raw):
        at = f"{where}[{number}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: expected a mapping with source and target, got {item!r}")
        # The engine's Mapping also reads these; a field it does not know, it ignores.
        unknown = sorted(set(item) & {"reference", "tolerance", "transform", "variable"})
        if unknown:
            raise ConfigError(f"{at}: unsupported field(s) {', '.join(unknown)}")
        source, target = item.get("source"), item.get("target")
        if isinstance(source, bool):  # YAML scalars, read as text the way Jackson reads them
            source = "true" if source else "false"
        elif isinstance(source, int | float):
            source = str(source)
        if not isinstance(source, str) or not source or not isinstance(target, str):
            raise ConfigError(f"{at}: source and target must be non-empty strings")
        tasks = source.startswith("$.tasks.")
        if tasks and len(source.split(".")) < 4:
            raise ConfigError(f"{at}: source {source!r}: expected $.tasks.{{task}}.trigger_url")
        source_path = None
        if source.startswith("$") and not tasks:
            source_path = compile_path(source, where=f"{at}.source")
        target_path = compile_path(target, where=f"{at}.target", wildcard=False)
        rules.append(Rule(source, target, source_path, target_path))
    return tuple(rules)


def apply(
    rules: Sequence[Rule],
    *,
    context: dict[str, Any],
    input: dict[str, Any],
    output: dict[str, Any],
    trigger_url: Callable[[str], str],
) -> None:
    """Run ``rules`` in order, writing into the three maps in place."""
    scope = {"context": context, "input": input, "output": output}
    for rule in rules:
        value = rule.value(scope, trigger_url)
        if value is None:
            continue
        try:
            _set(scope, rule.target_path, value)
        except (TypeError, IndexError, AttributeError):
            continue  # the engine logs a mapping it cannot write and goes on

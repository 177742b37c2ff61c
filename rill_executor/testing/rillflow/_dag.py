"""The engine's DAG descriptor (YAML): ``function`` and ``foreach`` tasks, loaded and checked.

Checked as the engine's ``FlowDAGValidator`` does (names of letters and digits, unique across
the whole descriptor including ``workspace`` and ``dagName``, ``next`` naming a sibling, no
cycle). A field the engine does not know is ignored, as its Jackson mapper does
(``FAIL_ON_UNKNOWN_PROPERTIES`` off); a field the engine knows and this simulator does not
simulate (``successConditions``, ``synchronization``…) is a ``ConfigError`` naming it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import yaml

from rill_executor import ConfigError

from ._mapping import Rule, Segment, compile_path, parse_rules
from ._model import Pattern, Task
from ._policy import Retry

__all__ = ["Dag", "ForeachNode", "FunctionNode", "Node"]

_NAME = re.compile(r"^[a-zA-Z0-9]{1,100}$")
_COMMON = {"category", "name", "title", "description", "next", "inputMappings", "outputMappings"}
_FUNCTION = _COMMON | {
    "resourceName",
    "pattern",
    "requestType",
    "timeline",
    "retry",
    "tolerance",
}
_FOREACH = _COMMON | {"iterationMapping", "tasks"}
_DAG = {"version", "type", "workspace", "dagName", "tasks"}

# The properties the engine's YAML mapper reads into its own classes (their @JsonCreator,
# and BaseTask's setters).
_ENGINE_TASK = {
    *("name", "title", "description", "category", "next", "tolerance", "inputMappings"),
    *("outputMappings", "progress", "degrade", "timeline", "keyCallback", "keyExp"),
    *("parameters", "templateId", "input", "inputType", "outputType"),
}
_ENGINE_FUNCTION = _ENGINE_TASK | {
    *("resourceName", "resourceProtocol", "resource", "pattern", "successConditions"),
    *("failConditions", "retry", "requestType"),
}  # FunctionTask
# ForeachTask; its tolerance too, set through BaseTask's setter.
_ENGINE_FOREACH = _ENGINE_TASK | {"synchronization", "iterationMapping", "tasks"}
_ENGINE_DAG = {
    *("workspace", "dagName", "version", "type", "timer", "tasks", "resources", "callback"),
    *("callback_config", "callbackConfig", "defaultContext", "commonMapping", "namespace"),
    *("service", "inputSchema", "output", "endTaskName"),
}  # DAG
_ENGINE_RETRY = {"intervalInSeconds", "maxRetryTimes", "multiplier", "conditions"}  # Retry
_ENGINE_TIMELINE = {
    *("timeoutInSeconds", "skipOnTimeout", "suspenseIntervalSeconds", "suspenseTimestamp"),
}  # Timeline
_ENGINE_ITERATION = {"collection", "item", "index", "identity"}  # IterationMapping


@dataclass(frozen=True)
class FunctionNode:
    """A ``function`` task: what to dispatch (``task``, its input still to be mapped)."""

    task: Task
    input_mappings: tuple[Rule, ...]
    output_mappings: tuple[Rule, ...]
    next: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.task.name


@dataclass(frozen=True)
class ForeachNode:
    """A ``foreach`` task: its ``tasks`` run once per element of the mapped ``collection``."""

    name: str
    collection: tuple[Segment, ...]
    item: str
    index: str | None
    input_mappings: tuple[Rule, ...]
    output_mappings: tuple[Rule, ...]
    next: tuple[str, ...]
    tasks: tuple[FunctionNode, ...]


Node = FunctionNode | ForeachNode


def _check_fields(raw: Mapping[str, Any], allowed: set[str], where: str, engine: set[str]) -> None:
    """Refuse the fields the engine reads (``engine``) that the simulator does not."""
    unsupported = sorted((set(raw) & engine) - allowed)
    if unsupported:
        raise ConfigError(
            f"{where}: unsupported field(s) {', '.join(unsupported)} (the engine reads them; "
            "the simulator does not simulate them)"
        )


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigError(f"{where}: name must be 1-100 letters or digits, got {value!r}")
    return value


def _number(raw: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}.{key}: expected a number, got {value!r}")
    return value


def _retry(raw: Any, where: str) -> Retry:
    if raw is None:
        return Retry()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {raw!r}")
    _check_fields(raw, {"maxRetryTimes", "intervalInSeconds", "multiplier"}, where, _ENGINE_RETRY)
    times = _number(raw, "maxRetryTimes", where, 0)
    if times != int(times):
        raise ConfigError(f"{where}.maxRetryTimes: expected an integer, got {times!r}")
    try:
        return Retry(
            max_retry_times=int(times),
            interval_in_seconds=_number(raw, "intervalInSeconds", where, 0),
            multiplier=_number(raw, "multiplier", where, 1.0),
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _timeout(raw: Any, pattern: Pattern, where: str) -> float | None:
    # The engine arms the timeout for the async patterns only: on task_sync it does nothing.
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {raw!r}")
    _check_fields(raw, {"timeoutInSeconds"}, where, _ENGINE_TIMELINE)
    if "timeoutInSeconds" not in raw or pattern is not Pattern.TASK_ASYNC:
        return None
    seconds = _number(raw, "timeoutInSeconds", where, 0)
    if seconds <= 0:
        raise ConfigError(f"{where}.timeoutInSeconds: must be > 0, got {seconds!r}")
    return seconds


def _resource(value: Any, base_url: str | None, where: str) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ConfigError(f"{where}.resourceName: expected an http(s) URL, got {value!r}")
    if base_url is None:
        return str(value)
    base = urlsplit(base_url)
    path = base.path.rstrip("/") + parts.path
    return urlunsplit((base.scheme, base.netloc, path, parts.query, parts.fragment))


def _next(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    value = raw.get("next")
    if value is None:
        return ()
    if not isinstance(value, str):
        raise ConfigError(f"{where}.next: expected comma-separated task names, got {value!r}")
    # FlowDAGValidator.validateTaskRoute: Java's split(","), nothing trimmed (only trailing
    # empty names dropped), so "a, b" names " b", which no task is.
    names = value.split(",")
    while names and not names[-1]:
        names.pop()
    return tuple(names)


def _function(raw: Mapping[str, Any], name: str, base_url: str | None, where: str) -> FunctionNode:
    _check_fields(raw, _FUNCTION, where, _ENGINE_FUNCTION)
    pattern = raw.get("pattern")
    if pattern not in {p.value for p in Pattern}:
        raise ConfigError(
            f"{where}.pattern: supported are task_sync and task_async, got {pattern!r}"
        )
    request_type = str(raw.get("requestType") or "POST").upper()
    if request_type not in {"GET", "POST"}:
        raise ConfigError(f"{where}.requestType: supported are GET and POST, got {request_type!r}")
    tolerance = raw.get("tolerance", False)
    if not isinstance(tolerance, bool):
        raise ConfigError(f"{where}.tolerance: expected true or false, got {tolerance!r}")
    method: Literal["GET", "POST"] = "GET" if request_type == "GET" else "POST"
    task = Task(
        name,
        _resource(raw.get("resourceName"), base_url, where),
        Pattern(pattern),
        retry=_retry(raw.get("retry"), f"{where}.retry"),
        timeout_in_seconds=_timeout(raw.get("timeline"), Pattern(pattern), f"{where}.timeline"),
        request_type=method,
        tolerance=tolerance,
    )
    return FunctionNode(
        task,
        parse_rules(raw.get("inputMappings"), where=f"{where}.inputMappings"),
        parse_rules(raw.get("outputMappings"), where=f"{where}.outputMappings"),
        _next(raw, where),
    )


def _foreach(
    raw: Mapping[str, Any], name: str, base_url: str | None, names: set[str], where: str
) -> ForeachNode:
    _check_fields(raw, _FOREACH, where, _ENGINE_FOREACH)
    iteration = raw.get("iterationMapping")
    at = f"{where}.iterationMapping"
    if not isinstance(iteration, dict):
        raise ConfigError(f"{at}: expected a mapping with collection and item")
    _check_fields(iteration, {"collection", "item", "index"}, at, _ENGINE_ITERATION)
    collection = compile_path(iteration.get("collection"), where=f"{at}.collection", wildcard=False)
    if collection[0] != "input":
        raise ConfigError(f"{at}.collection: a path under $.input, got {iteration['collection']!r}")
    item, index = iteration.get("item"), iteration.get("index")
    if not isinstance(item, str) or not item or not isinstance(index, str | None):
        raise ConfigError(f"{at}: item (and index, if given) must be non-empty strings")
    children = _tasks(raw.get("tasks"), base_url, names, f"{where}.tasks", nested=True)
    return ForeachNode(
        name,
        collection,
        item,
        index or None,
        parse_rules(raw.get("inputMappings"), where=f"{where}.inputMappings"),
        parse_rules(raw.get("outputMappings"), where=f"{where}.outputMappings"),
        _next(raw, where),
        tuple(child for child in children if isinstance(child, FunctionNode)),
    )


def _tasks(
    raw: Any, base_url: str | None, names: set[str], where: str, *, nested: bool = False
) -> tuple[Node, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: expected a non-empty list of tasks")
    nodes: list[Node] = []
    for number, item in enumerate(raw):
        at = f"{where}[{number}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: expected a task mapping, got {item!r}")
        name = _name(item.get("name"), at)
        at = f"task {name!r}"
        if name in names:
            raise ConfigError(f"{at}: name duplicated")
        names.add(name)
        category = item.get("category")
        if category == "function":
            nodes.append(_function(item, name, base_url, at))
        elif category == "foreach" and not nested:
            nodes.append(_foreach(item, name, base_url, names, at))
        else:
            supported = "function" if nested else "function and foreach"
            raise ConfigError(f"{at}.category: supported are {supported}, got {category!r}")
    _check_routes(nodes, where)
    return tuple(nodes)


def _check_routes(nodes: list[Node], where: str) -> None:
    following = {node.name: node.next for node in nodes}
    for node in nodes:
        for successor in node.next:
            if successor not in following:
                # DDLErrorCode.TASK_NEXT_INVALID: "next task %s not exist."
                raise ConfigError(
                    f"task {node.name!r}.next: no task {successor!r} in {where} (the engine splits"
                    " next on ',' and trims nothing: write a,b)"
                )

    def visit(name: str, route: tuple[str, ...]) -> None:
        if name in route:
            raise ConfigError(f"{where}: circle found: {'->'.join((*route, name))}")
        for successor in following[name]:
            visit(successor, (*route, name))

    for name in following:
        visit(name, ())


@dataclass(frozen=True)
class Dag:
    """A Rill Flow DAG descriptor, loaded with ``Dag.load``."""

    workspace: str
    name: str
    tasks: tuple[Node, ...]

    @classmethod
    def load(cls, source: str | os.PathLike[str], *, base_url: str | None = None) -> Dag:
        """Parse a descriptor: a path to a YAML file, or the YAML text itself.

        Supported: ``function`` tasks (``resourceName``, ``pattern`` task_sync/task_async,
        ``requestType``, ``inputMappings``, ``outputMappings``, ``next``,
        ``timeline.timeoutInSeconds``, ``retry``, ``tolerance``) and ``foreach`` tasks
        (``iterationMapping`` collection/item/index, ``tasks``, mappings, ``next``).
        ``base_url`` replaces scheme, host and port of every ``resourceName`` (its path is
        put in front of theirs), so one descriptor runs against an executor on any port.
        Another field the engine reads is a ``ConfigError`` naming it; a field the engine
        does not know is ignored, as the engine ignores it.
        """
        if base_url is not None:
            parts = urlsplit(base_url)
            if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query:
                raise ConfigError(
                    f"base_url must be http(s)://host[:port][/path], got {base_url!r}"
                )
        text = _read(source)
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"the descriptor is not valid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"a descriptor is a YAML mapping (or a path to one), got {text!r}")
        _check_fields(raw, _DAG, "the descriptor", _ENGINE_DAG)
        if raw.get("type") != "flow":
            raise ConfigError(f"the descriptor's type: supported is flow, got {raw.get('type')!r}")
        workspace = _name(raw.get("workspace"), "the descriptor's workspace")
        name = _name(raw.get("dagName"), "the descriptor's dagName")
        names = {workspace, name}
        return cls(workspace, name, _tasks(raw.get("tasks"), base_url, names, "tasks"))


def _read(source: str | os.PathLike[str]) -> str:
    if isinstance(source, str) and ("\n" in source or not Path(source).is_file()):
        return source
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the descriptor {os.fspath(source)!r}: {exc}") from None

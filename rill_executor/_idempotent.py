"""What the ``idempotent`` decorator knows of a handler, and the claim it runs under.

``IdempotentSpec`` holds the pure parts: the business identity of a call, which errors are
terminal, how long to join a running attempt, how to check a result. The call itself is the
step in ``_steps.call``, driven by the ledger twins.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import PydanticSchemaGenerationError, TypeAdapter

from ._codec import adapter_for, type_name
from ._config import LedgerConfig, Seconds, to_us
from ._errors import ConfigError, InvalidKey, TerminalError, UsageError
from ._keys import fingerprint_of, handler_key, scoped_key, validate_handler_name
from ._store import Completion

__all__ = [
    "HANDLER_NAME",
    "Handler",
    "HandlerNames",
    "IdempotentOptions",
    "IdempotentSpec",
    "Origin",
    "stored_key",
]


class Committing(Protocol):
    """A claim, as far as a spec needs it: the commit of a result under it."""

    def commit_of(
        self, result: Any, *, adapter: Any = None, source: str = ..., expected: str = ...
    ) -> Completion: ...


HANDLER_NAME = "__rill_handler__"  # the attribute a decorated function carries its name in
Handler = str | Callable[..., Any]


def stored_key(key: str, handler: Handler | None) -> str:
    """The key a job is stored under: ``key`` itself, or scoped by a decorated handler."""
    if handler is None:
        return key
    name = handler if isinstance(handler, str) else getattr(handler, HANDLER_NAME, None)
    if name is None:
        raise UsageError(
            f"{handler!r} is not decorated with idempotent(); pass the decorated function"
            " or its name"
        )
    return handler_key(name, key)


def default_name(fn: Callable[..., Any]) -> str:
    """A handler's name when ``idempotent(name=…)`` is not given: its qualified name,
    without its module, whose name depends on how the process started (``__main__`` in a
    script, ``__mp_main__`` in a spawned worker, the import name under an ASGI server).
    A lambda, or a function defined inside another, has none that lasts: ``ConfigError``."""
    name = getattr(fn, "__qualname__", None)
    if not isinstance(name, str):
        raise ConfigError(f"{fn!r} has no __qualname__: pass idempotent(name=...)")
    if "<lambda>" in name or "<locals>" in name:
        # Such a name is where the function is written, not what it does: moving it out of
        # its function (or naming the lambda) would silently start a new set of jobs.
        short = name.rsplit(".", 1)[-1]
        where = "a lambda" if short == "<lambda>" else "defined inside a function"
        example = "transcode" if short == "<lambda>" else short
        raise ConfigError(
            f"handler {name!r} is {where}, so its default name would change if it moved:"
            f" pass it a durable name, e.g. idempotent(name={example!r}, key=...)"
            " (or task(path, name=...) on a RillFlowExecutor)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a handler was defined, to tell one function decorated again (a module imported
    under a second name, reloaded, a spawned worker's re-import) from another function of
    the same qualified name."""

    qualname: str
    module: str | None
    file: str | None

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Origin:
        defined = inspect.unwrap(fn)  # through functools.wraps, to the user's function
        code = getattr(defined, "__code__", None)
        file = getattr(code, "co_filename", None)
        if isinstance(file, str) and not file.startswith("<"):  # "<stdin>", "<string>"
            file = os.path.normcase(os.path.abspath(file))
        return cls(
            getattr(fn, "__qualname__", repr(fn)), getattr(defined, "__module__", None), file
        )

    def same_as(self, other: Origin) -> bool:
        """The same function: one qualified name, from one file or one module name."""
        return self.qualname == other.qualname and (
            (self.file is not None and self.file == other.file)
            or (self.module is not None and self.module == other.module)
        )

    def __str__(self) -> str:
        return f"{self.qualname} (in {self.module or self.file or 'an unknown module'})"


class HandlerNames:
    """The default handler names taken on one ledger, and by which function: one default
    name taken by two different functions would mix their jobs unasked, so the second is
    refused. A name given with ``name=`` is chosen, and may be shared on purpose."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._taken: dict[str, list[Origin]] = {}  # each decoration that took a name
        self._lock = threading.Lock()

    def take(self, name: str, origin: Origin) -> None:
        with self._lock:
            holders = self._taken.setdefault(name, [])
            if not holders or any(h.same_as(origin) for h in holders):
                if origin not in holders:
                    holders.append(origin)
                return
        raise ConfigError(
            f"handlers {holders[0]} and {origin} would both take the default name {name!r}"
            f" (a handler's qualified name) on this ledger (namespace {self._namespace!r}),"
            " and their jobs would mix: pass each a durable name with idempotent(name=...)"
        )


@dataclass(frozen=True, slots=True)
class IdempotentOptions:
    """The arguments of ``idempotent()``, as given (see ``Ledger.idempotent``)."""

    key: Callable[..., object]
    fingerprint: Callable[..., Any] | None = None
    result_version: Callable[..., str | None] | str | None = None
    wait: Seconds | None = None
    heartbeat: bool | Seconds = True
    terminal: tuple[type[BaseException], ...] = ()
    name: str | None = None  # the durable identity of the handler's jobs


@dataclass(frozen=True)
class IdempotentSpec:
    fn: Callable[..., Any]
    name: str
    options: IdempotentOptions
    wait: float | None  # seconds
    heartbeat: float | None  # seconds between renewals, None for none
    terminal: tuple[type[BaseException], ...]
    signature: inspect.Signature = field(init=False)
    _arguments: _Arguments | None = field(init=False)

    def __post_init__(self) -> None:
        signature = inspect.signature(self.fn)
        object.__setattr__(self, "signature", signature)
        object.__setattr__(self, "_arguments", _Arguments.of(signature))

    @classmethod
    def build(
        cls, fn: Callable[..., Any], options: IdempotentOptions, config: LedgerConfig
    ) -> IdempotentSpec:
        if not callable(options.key):
            raise UsageError("idempotent(key=...) must be a function of the handler's arguments")
        interval: float | None
        if options.heartbeat is True:
            interval = config.lease_us / 3 / 1e6
        elif options.heartbeat is False:
            interval = None
        else:
            interval = to_us(options.heartbeat, "heartbeat") / 1e6
        wait = None if options.wait is None else to_us(options.wait, "wait") / 1e6
        try:
            label = validate_handler_name(
                default_name(fn) if options.name is None else options.name
            )
        except InvalidKey as exc:
            raise ConfigError(f"idempotent(name=...): {exc}") from None
        spec = cls(fn, label, options, wait, interval, (TerminalError, *options.terminal))
        try:
            typing.get_type_hints(fn)
        except NameError:
            return spec  # a forward reference: checked on the first call, before any work
        spec.adapter  # noqa: B018  # refuse a return type that cannot be stored, now
        return spec

    def identity(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, str, str | None]:
        """(stored key, fingerprint, result version) of one call; the stored key is the
        business key scoped by the handler's name, so handlers never share jobs."""
        options = self.options
        key = scoped_key(self.name, options.key(*args, **kwargs))
        if options.fingerprint is not None:
            payload = options.fingerprint(*args, **kwargs)
        elif self._arguments is None or (payload := self._arguments.named(args, kwargs)) is None:
            bound = self.signature.bind(*args, **kwargs)  # raises for a call that does not fit
            bound.apply_defaults()
            payload = dict(bound.arguments)
        version = (
            options.result_version(*args, **kwargs)
            if callable(options.result_version)
            else options.result_version
        )
        return key, fingerprint_of(payload), version

    @functools.cached_property
    def return_type(self) -> Any:
        # Resolved when decorated, or on the first call for a forward reference.
        return typing.get_type_hints(self.fn).get("return", Any)

    @functools.cached_property
    def return_name(self) -> str:
        return type_name(self.return_type)

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        try:
            return adapter_for(self.return_type)
        except PydanticSchemaGenerationError as exc:
            raise ConfigError(
                f"handler {self.name} is annotated to return {type_name(self.return_type)},"
                " which cannot be stored: pydantic has no JSON schema for it. Return a"
                " pydantic model, a dataclass, a TypedDict or plain JSON types"
            ) from exc

    def completion_of(self, claim: Committing, result: Any) -> Completion:
        """The commit of ``result`` under ``claim``, checked to replay as the return type
        (raises a ``UsageError`` for a result that cannot be stored)."""
        return claim.commit_of(
            result, adapter=self.adapter, source=f"handler {self.name}", expected=self.return_name
        )

    def is_terminal(self, exc: BaseException) -> bool:
        return isinstance(exc, self.terminal)


@dataclass(frozen=True, slots=True)
class _Arguments:
    """A handler's arguments by name, without ``inspect``'s binding: for a signature of plain
    parameters (no ``*args``, ``**kwargs`` or keyword-only ones), the common case."""

    names: tuple[str, ...]
    defaults: dict[str, Any]

    @classmethod
    def of(cls, signature: inspect.Signature) -> _Arguments | None:
        params = signature.parameters.values()
        if any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params):
            return None
        defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        return cls(tuple(signature.parameters), defaults)

    def named(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The arguments by name, or None when the call needs ``bind`` (to say what is wrong)."""
        if not kwargs and len(args) == len(self.names):  # every argument given by position
            return dict(zip(self.names, args, strict=True))
        if len(args) > len(self.names):
            return None
        named = dict(zip(self.names, args, strict=False))
        if kwargs:
            if any(k in named or k not in self.names for k in kwargs):
                return None
            named.update(kwargs)
        if len(named) < len(self.names):
            missing = [n for n in self.names if n not in named]
            if any(n not in self.defaults for n in missing):
                return None
            named.update((n, self.defaults[n]) for n in missing)
        return named

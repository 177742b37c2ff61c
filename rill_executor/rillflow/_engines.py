"""Where callbacks may go: the engines the executor was told of.

A dispatch's ``X-Callback-Url`` is where the job's result is posted, so a caller who can
send a dispatch could have a stored result posted anywhere. Callbacks therefore go only to
the engines the operator names (``RillFlowExecutor(engines=[...])``, or
``engines=Engines.from_env()`` for the ``RILL_ENGINES`` variable): base URLs
(``http://rill-flow:8080``: scheme, host, port and path prefix must match) or hosts
(``rill-flow``, ``rill-flow:8080``: any http(s) URL on that host, and port when given).
Without ``engines``, a callback may go only to the dispatch's own peer: the engine that
sent the dispatch, when nothing stands between them (a proxy in between: name the engines).
Even then, never to a loopback, link-local or unspecified address: behind a sidecar or mesh
proxy the peer is the local host, and a dispatch could name any of its ports (a proxy's
admin endpoint). Such an engine, a local simulator say, is named (``engines=["127.0.0.1"]``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from .. import ConfigError

__all__ = ["Engines"]

_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class _Engine:
    scheme: str | None  # None: any of http, https
    host: str
    port: int | None  # None: any port (a host entry without one)
    path: str  # the base URL's path prefix ("" for a host entry)

    def allows(self, url: SplitResult, host: str, port: int) -> bool:
        if self.scheme is not None and url.scheme != self.scheme:
            return False
        if host != self.host or (self.port is not None and port != self.port):
            return False
        path = url.path or "/"
        return not self.path or path == self.path or path.startswith(self.path + "/")


def _split(url: str) -> tuple[SplitResult, str, int] | None:
    """The URL, its host (lower case) and port; None if it is not an http(s) URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _SCHEMES or not parts.hostname or parts.username is not None:
        return None
    return parts, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme]


def _local(host: str) -> bool:
    """Whether ``host`` is the local host's own: loopback, link-local (169.254.0.0/16,
    fe80::/10) or unspecified (0.0.0.0, ::), an IPv4 address mapped into IPv6 included."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.partition("%")[0])  # without an IPv6 zone
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_link_local or address.is_unspecified


def _engine(entry: object, source: str) -> _Engine:
    if not isinstance(entry, str) or not entry.strip():
        raise ConfigError(f"an engine is a base URL or a host name, not {entry!r} (in {source})")
    text = entry.strip()
    if "://" in text:
        found = _split(text)
        if found is None or found[0].query or found[0].fragment:
            raise ConfigError(
                f"engine {entry!r} is not an http(s) base URL such as 'http://rill-flow:8080'"
                f" (in {source})"
            )
        parts, host, port = found
        return _Engine(parts.scheme, host, port, parts.path.rstrip("/"))
    found = _split(f"http://{text}")
    if found is None or found[0].path or found[0].query or found[0].fragment:
        raise ConfigError(
            f"engine {entry!r} is not a host such as 'rill-flow' or 'rill-flow:8080' (in {source})"
        )
    parts, host, _ = found
    return _Engine(None, host, parts.port, "")


class Engines:
    """The engines callbacks may go to: base URLs (``http://rill-flow:8080/flow``) or hosts
    (``rill-flow``, ``rill-flow:8080``); ``None``: only to each dispatch's own peer.

    ``source`` says where they were set; a refused callback's reason names it, so the
    operator knows what to change."""

    def __init__(
        self, entries: Iterable[str] | None, *, source: str = "RillFlowExecutor(engines=[...])"
    ) -> None:
        if isinstance(entries, (str, bytes)):
            raise ConfigError(
                "engines must be a list of base URLs or hosts, e.g."
                f" engines=[{entries!r}], not a single string"
            )
        self.source = source
        self.configured = entries is not None
        self._engines = [] if entries is None else [_engine(e, source) for e in entries]
        if self.configured and not self._engines:
            raise ConfigError(f"engines is empty ({source}): name at least one, or leave it unset")

    @classmethod
    def from_env(
        cls, variable: str = "RILL_ENGINES", environ: Mapping[str, str] | None = None
    ) -> Engines:
        """The engines named in an environment variable, comma-separated (unset or blank:
        none, only each dispatch's own peer); a refused callback's reason names the
        variable."""
        text = (os.environ if environ is None else environ).get(variable, "")
        entries = [entry for entry in text.split(",") if entry.strip()]
        return cls(entries or None, source=f"{variable} (comma-separated base URLs or hosts)")

    def elsewhere(self, url: str) -> str | None:
        """Why a callback to ``url`` is left to another executor (None if this one sends
        it, or nobody can): an http(s) URL on no engine configured here, which an executor
        serving that engine (another service of the namespace, or one whose engines changed)
        may send."""
        if not self.configured or _split(url) is None:
            return None
        return self.refusal(url)

    def refusal(self, url: str, peer: str | None = None) -> str | None:
        """Why a callback may not go to ``url`` (None if it may). ``peer``: the host that
        sent the dispatch, the only one allowed when no engines are configured; the
        deliverer, which has no peer, checks only the configured engines and the scheme."""
        found = _split(url)
        if found is None:
            return f"the callback URL {url[:200]!r} is not an http(s) URL"
        parts, host, port = found
        if self.configured:
            if any(engine.allows(parts, host, port) for engine in self._engines):
                return None
            return (
                f"the callback URL {url[:200]!r} is not on an engine this executor serves;"
                f" name the engine in {self.source}"
            )
        if peer is not None and _local(host):
            named = f"[{host}]" if ":" in host else host
            return (
                f"the callback URL's host {host!r} is a loopback, link-local or unspecified"
                " address, refused unless named: a proxy in front of this executor would"
                " forward there; for an engine (or simulator) on this host, name it in"
                f" {self.source}, e.g. {named!r}"
            )
        if peer is None or host == peer.lower().strip("[]"):
            return None
        return (
            f"the callback URL's host {host!r} is not the dispatch's sender ({peer!r}); behind"
            " a proxy, or with the engine calling back on another address, name the engine in"
            f" {self.source}"
        )

"""A store's connections through a proxy that can go down and come back: an outage.

Down, it refuses new connections and drops the open ones (the server sees its clients go,
as when a network path fails and is reset); up, it forwards to the server again.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from rill_executor.testing.drill import FaultProxy

__all__ = ["StoreLink"]


class StoreLink(FaultProxy):
    def __init__(self, url: str) -> None:
        self._direct = url
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        super().__init__(parts.hostname, parts.port)
        self._server_port = parts.port

    @property
    def url(self) -> str:
        """The store URL, through this link."""
        parts = urlsplit(self._direct)
        netloc = parts.netloc.replace(f":{parts.port}", f":{self.port}")
        return urlunsplit(parts._replace(netloc=netloc))

    def down(self) -> None:
        self.retarget(None)
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def up(self) -> None:
        self.retarget(self._server_port)

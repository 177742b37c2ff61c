"""What a Redis deployment promises about acknowledged writes, and the checks of it.

A claim or commit that Redis acknowledged and then lost (a restart without AOF, an
``appendfsync no`` crash, an evicted key) lets the next duplicate claim the job again: the
work runs twice. ``Deployment`` reports, per primary, the settings that decide this, and
``enforce`` applies the store URL's ``durability=`` policy to it:

- ``warn`` (default): ``warnings.warn`` a ``DurabilityWarning`` naming each risk. A warning,
  not a log line, so it is visible by default at start-up and test suites can turn it
  into an error (``filterwarnings = error``) or filter it.
- ``require``: raise ``UnsafeDeployment`` instead.
- ``ignore``: no check and no round trips (tests, or a deployment checked elsewhere).

Settings change under a running store (``CONFIG SET maxmemory-policy allkeys-lru``), so
the check runs again while the store is used (``rill_executor.store.Recheck``): before the
first claim after the store's client made a new connection, and at most every 30 s
otherwise, on the claim that comes due. A store found unsafe under ``require`` refuses
every claim with ``UnsafeDeployment`` until a check finds it safe again; under ``warn`` a
check that finds new risks warns again.

Replication is not checked: Redis replicates asynchronously, so a failover can lose the
last writes even with AOF on every node. See docs/redis.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import ResponseError

from rill_executor.store import DurabilityWarning, UnsafeDeployment, callers_level

from ._url import Durability

if TYPE_CHECKING:
    from ._client import AsyncClient, SyncClient

__all__ = [
    "SETTINGS",
    "Deployment",
    "Durability",
    "DurabilityWarning",
    "NodeDurability",
    "UnsafeDeployment",
    "aprobe",
    "enforce",
    "node_from_config",
    "node_from_info",
    "probe",
    "unsafe",
]

SETTINGS = ("appendonly", "appendfsync", "maxmemory-policy")


@dataclass(frozen=True, slots=True)
class NodeDurability:
    """One primary's settings; None where the server would not say (CONFIG disabled)."""

    address: str
    appendonly: bool | None
    appendfsync: str | None
    maxmemory_policy: str | None

    def risks(self) -> list[str]:
        found = []
        if self.appendonly is False:
            found.append(
                "appendonly is no: writes acknowledged since the last RDB snapshot are lost"
                " when Redis restarts or crashes (set appendonly yes)"
            )
        if self.appendonly and self.appendfsync == "no":
            found.append(
                "appendfsync is no: the OS flushes the AOF when it likes, so a machine crash"
                " loses acknowledged writes (use everysec or always)"
            )
        if self.maxmemory_policy not in (None, "noeviction"):
            found.append(
                f"maxmemory-policy is {self.maxmemory_policy}: at maxmemory Redis deletes"
                " keys, including job records under retention (set noeviction)"
            )
        return found


@dataclass(frozen=True, slots=True)
class Deployment:
    nodes: tuple[NodeDurability, ...]

    @property
    def risks(self) -> list[str]:
        return [f"{node.address}: {risk}" for node in self.nodes for risk in node.risks()]

    @property
    def safe(self) -> bool:
        return not self.risks


def node_from_config(address: str, config: Mapping[str, str | None]) -> NodeDurability:
    """From ``CONFIG GET`` replies merged into one mapping."""
    appendonly = config.get("appendonly")
    return NodeDurability(
        address=address,
        appendonly=None if appendonly is None else appendonly == "yes",
        appendfsync=config.get("appendfsync"),
        maxmemory_policy=config.get("maxmemory-policy"),
    )


def node_from_info(address: str, info: Mapping[str, object]) -> NodeDurability:
    """From ``INFO persistence`` + ``INFO memory``, where CONFIG is disabled (managed Redis)."""
    aof = info.get("aof_enabled")
    policy = info.get("maxmemory_policy")
    return NodeDurability(
        address=address,
        appendonly=None if aof is None else str(aof) == "1",
        appendfsync=None,
        maxmemory_policy=None if policy is None else str(policy),
    )


def enforce(deployment: Deployment, policy: Durability, where: str) -> None:
    """Warn about or refuse a deployment that can lose acknowledged writes."""
    risks = deployment.risks
    if not risks or policy is Durability.IGNORE:
        return
    message = unsafe(risks, where)
    if policy is Durability.REQUIRE:
        raise UnsafeDeployment(message)
    warnings.warn(message, DurabilityWarning, stacklevel=callers_level())


def unsafe(risks: list[str], where: str) -> str:
    """The message of a warning or refusal for ``risks``."""
    return (
        f"Redis store at {where} can lose acknowledged claims or commits, and a lost claim or"
        f" commit means a duplicate runs the work again: {'; '.join(risks)}."
        " See docs/redis.md; add ?durability=ignore to the URL to silence this"
    )


# The probes: a few round trips per primary, once, when a store is opened.


def probe(client: SyncClient, where: str) -> Deployment:
    if isinstance(client, redis.cluster.RedisCluster):
        primaries = [(node.name, node.redis_connection) for node in _primaries(client)]
        return Deployment(tuple(_probe_node(name, conn) for name, conn in primaries if conn))
    return Deployment((_probe_node(where, client),))


def _primaries(client: redis.cluster.RedisCluster) -> list[redis.cluster.ClusterNode]:
    nodes: list[redis.cluster.ClusterNode] = client.get_primaries()  # type: ignore[no-untyped-call]
    return nodes


def _probe_node(address: str, client: redis.Redis) -> NodeDurability:
    try:
        config: dict[str, str | None] = {}
        for name in SETTINGS:
            config.update(_decoded(client.config_get(name)))
        return node_from_config(address, config)
    except ResponseError:  # CONFIG renamed or forbidden, as on managed services
        return node_from_info(address, {**client.info("persistence"), **client.info("memory")})


async def aprobe(client: AsyncClient, where: str) -> Deployment:
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        await client.initialize()
        nodes = [await _aprobe_cluster_node(client, node) for node in client.get_primaries()]
        return Deployment(tuple(nodes))
    try:
        config: dict[str, str | None] = {}
        for name in SETTINGS:
            config.update(_decoded(await client.config_get(name)))
        return Deployment((node_from_config(where, config),))
    except ResponseError:
        info = {**await client.info("persistence"), **await client.info("memory")}
        return Deployment((node_from_info(where, info),))


async def _aprobe_cluster_node(
    client: redis.asyncio.cluster.RedisCluster, node: redis.asyncio.cluster.ClusterNode
) -> NodeDurability:
    try:
        config: dict[str, str | None] = {}
        for name in SETTINGS:
            config.update(_decoded(await client.config_get(name, target_nodes=node)))
        return node_from_config(node.name, config)
    except ResponseError:
        persistence = await client.info("persistence", target_nodes=node)
        memory = await client.info("memory", target_nodes=node)
        return node_from_info(node.name, {**persistence, **memory})


def _decoded(reply: Mapping[Any, Any]) -> dict[str, str | None]:
    def text(value: object) -> str | None:
        return value.decode() if isinstance(value, bytes) else None if value is None else str(value)

    return {str(text(name)): text(value) for name, value in reply.items()}

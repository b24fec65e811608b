"""``MetadataStore``: the one interface to cluster metadata, and its events.

Two backends implement it: :class:`~odradek.metadata.local.LocalMetadataStore` (a single
node; state in the data directory) and, for a cluster, a ZooKeeper backend. Reads are
synchronous and served from memory (the ZooKeeper backend keeps its cache fresh with
watches); changes are coroutines because in a cluster they are writes to ZooKeeper that the
controller acts on. Whoever needs to react to a change (the broker creating or deleting
logs, a partition changing leader) subscribes to the events below, which both backends
publish the same way: topic-level events for topics and configs, and
``PartitionStatesChanged`` for the partition state (leader, leader epoch, replicas, ISR) of
partitions that already exist.
"""

from __future__ import annotations

import abc
import base64
import enum
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from odradek.metadata.model import BrokerInfo, PartitionState, TopicMetadata
from odradek.security.acl import AccessControlEntry, ResourcePattern


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class PartitionsAdded:
    topic: TopicMetadata
    previous_count: int


@dataclass(frozen=True, slots=True)
class PartitionStatesChanged:
    """The leader, leader epoch, replicas or ISR of some of ``topic``'s partitions changed
    (the controller's decisions, or an ISR change it accepted). ``topic`` is the topic as
    it is now; ``partitions`` are the states that changed. Each broker applies the ones
    it hosts: ``ReplicaManager.become_leader_or_follower``."""

    topic: TopicMetadata
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class BrokerConfigChanged:
    configs: dict[str, str]
    cluster_default: bool = False  # resource "": the defaults of every broker


@dataclass(frozen=True, slots=True)
class EntityConfigsChanged:
    """The configs of a user or client entity changed (its SCRAM credentials or its quotas),
    or a group's (its group configs).
    ``entity`` is its path under Kafka's ``/config`` (see :func:`entity_path`); ``configs``
    are all it has now, empty when it has none left."""

    entity: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class AclsChanged:
    """The ACLs of one resource pattern changed; ``entries`` are all it has now."""

    pattern: ResourcePattern
    entries: frozenset[AccessControlEntry]


MetadataEvent = (TopicCreated | TopicDeleted | PartitionsAdded | PartitionStatesChanged
                 | TopicConfigChanged | BrokerConfigChanged | EntityConfigsChanged
                 | AclsChanged)

USERS = "users"
CLIENTS = "clients"
GROUPS = "groups"  # a consumer or share group's own configs (KIP-848, KIP-932)


class Default(enum.Enum):
    """The type of ``DEFAULT_ENTITY``."""

    DEFAULT = "<default>"

    def __repr__(self) -> str:
        return "DEFAULT_ENTITY"


# Kafka's <default> entity, whose quotas apply to users or clients without their own. A
# sentinel rather than the string "<default>", which a user may well be called: Kafka tells
# them apart by sanitizing the user's name ("%3Cdefault%3E").
DEFAULT_ENTITY = Default.DEFAULT
EntityName = str | Default | None


def entity_path(user: EntityName = None, client_id: EntityName = None) -> str:
    """Kafka's path of a quota or credential entity under ``/config``: ``users/<user>``,
    ``clients/<client id>`` or ``users/<user>/clients/<client id>``, names sanitized as
    Kafka's ``Sanitizer`` does (URL-encoded)."""
    parts = []
    if user is not None:
        parts += [USERS, _sanitize(user)]
    if client_id is not None:
        parts += [CLIENTS, _sanitize(client_id)]
    if not parts:
        raise ValueError("an entity has a user, a client id, or both")
    return "/".join(parts)


def group_entity(group_id: str) -> str:
    """The path under ``/config`` of a group's configs: ``groups/<group id>`` (sanitized)."""
    return f"{GROUPS}/{_sanitize(group_id)}"


def group_of_entity(path: str) -> str | None:
    """The group id of a group's entity path, None for a user or client entity."""
    parent, _, name = path.partition("/")
    return urllib.parse.unquote(name) if parent == GROUPS and "/" not in name else None


def parse_entity_path(path: str) -> tuple[EntityName, EntityName]:
    """(user, client id) of an entity path, the inverse of :func:`entity_path`."""
    parts = path.split("/")
    names = dict(zip(parts[::2], (_desanitize(p) for p in parts[1::2]), strict=True))
    return names.get(USERS), names.get(CLIENTS)


def _sanitize(name: str | Default) -> str:
    return name.value if isinstance(name, Default) else urllib.parse.quote(name, safe="")


def _desanitize(name: str) -> str | Default:
    return DEFAULT_ENTITY if name == DEFAULT_ENTITY.value else urllib.parse.unquote(name)


class TopicExistsError(Exception):
    """TOPIC_ALREADY_EXISTS"""


class UnknownTopicError(Exception):
    """UNKNOWN_TOPIC_OR_PARTITION"""


# Producer ids are reserved in blocks of this many (Kafka's ProducerIdManager): the store is
# written once per thousand idempotent producers, not once per producer.
PRODUCER_ID_BLOCK_SIZE = 1000


class MetadataStore(abc.ABC):
    """Cluster metadata. Not thread-safe: used from the broker's event loop only."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[MetadataEvent], None]] = []
        self._producer_ids: Iterator[int] = iter(())

    def subscribe(self, callback: Callable[[MetadataEvent], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, event: MetadataEvent) -> None:
        for callback in self._subscribers:
            callback(event)

    # -- reads, from memory ------------------------------------------------------------

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abc.abstractmethod
    def controller_id(self) -> int: ...

    @abc.abstractmethod
    def brokers(self) -> tuple[BrokerInfo, ...]: ...

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics().get(name)

    @abc.abstractmethod
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    @abc.abstractmethod
    def broker_configs(self, *, cluster_default: bool = False) -> dict[str, str]:
        """Dynamic broker config overrides: AlterConfigs on resource "<node id>", or on
        resource "" (the cluster-wide defaults) with ``cluster_default``."""

    @abc.abstractmethod
    def entity_configs(self) -> dict[str, dict[str, str]]:
        """Every user and client entity's configs (SCRAM credentials, quotas) and every
        group's configs, by entity path; entities without configs are left out."""

    @abc.abstractmethod
    def acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource pattern's ACLs (patterns without any are left out)."""

    # -- changes -----------------------------------------------------------------------

    @abc.abstractmethod
    async def alter_acls(self, pattern: ResourcePattern, *,
                         add: frozenset[AccessControlEntry] = frozenset(),
                         remove: frozenset[AccessControlEntry] = frozenset()
                         ) -> frozenset[AccessControlEntry]:
        """Adds and removes entries of one pattern's ACLs, atomically against other brokers
        doing the same; returns the pattern's entries after the change."""

    @abc.abstractmethod
    async def set_entity_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replaces the configs of the entity at path ``entity``; empty removes them all."""

    @abc.abstractmethod
    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, assignment: dict[int, tuple[int, ...]] | None = None,
    ) -> TopicMetadata:
        """``assignment``: each partition's replicas as the client asked, else placed by
        the store (Kafka's replica assignment)."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> TopicMetadata: ...

    @abc.abstractmethod
    async def create_partitions(
        self, name: str, total_count: int, *, assignments: list[tuple[int, ...]] | None = None
    ) -> TopicMetadata: ...

    @abc.abstractmethod
    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata: ...

    @abc.abstractmethod
    async def set_broker_configs(
        self, configs: dict[str, str], *, cluster_default: bool = False
    ) -> None: ...

    @abc.abstractmethod
    async def allocate_producer_ids(self, count: int) -> range:
        """Reserves the next ``count`` producer ids for this broker, durably: no id is ever
        reserved twice in the cluster, restarts included (KIP-98)."""

    async def generate_producer_id(self) -> int:
        """A producer id never handed out before (InitProducerId), from this broker's block.

        Two callers refilling the block at once each reserve one and the first block's rest
        goes unused: ids are skipped, never reused."""
        while (producer_id := next(self._producer_ids, None)) is None:
            self._producer_ids = iter(await self.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE))
        return producer_id

    def close(self) -> None:
        """Releases what the backend holds (a ZooKeeper session)."""


def new_cluster_id() -> str:
    """A cluster id the way Kafka makes one: a random UUID, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()

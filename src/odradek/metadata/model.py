"""The cluster model: brokers, topics and partition state, as the metadata store holds them.

These are values. A change is a new value published by the :class:`MetadataStore`, never an
edit in place, so a handler holding a ``TopicMetadata`` reads a consistent snapshot.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

# Kafka's rule (org.apache.kafka.common.internals.Topic): ASCII letters, digits, '.', '_'
# and '-', at most 249 characters so that "<topic>-<partition>" and the "-delete" suffix
# of a directory being removed stay within a 255-byte file name.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class InvalidTopicError(ValueError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


def validate_topic_name(name: str) -> None:
    """Kafka 3.9's ``Topic.validate``, with its messages."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not _LEGAL_TOPIC_NAME.fullmatch(name):
        reason = (f"'{name}' contains one or more characters other than "
                  "ASCII alphanumerics, '.', '_' and '-'")
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")


class Endpoint(NamedTuple):
    """One listener's name, host and port (Kafka's ``EndPoint``).

    In ``listeners`` it is where to bind (``PLAINTEXT://:9092`` is ("PLAINTEXT", "", 9092);
    "" binds every interface, port 0 an ephemeral port); in a :class:`BrokerInfo` it is where
    clients of that listener reach the broker.
    """

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker and the endpoint it advertises on each of its listeners.

    A client is told the endpoints of the listener it connected through only (Kafka's
    ``MetadataCache.getAliveBrokerNodes(listenerName)``): a broker without that listener is
    left out of its answers.
    """

    node_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener_name: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.name == listener_name), None)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch and replica sets of one partition (seeds: leaders, followers, ISR).

    On a single node the broker is leader of everything at epoch 0; the ZooKeeper backend
    will publish the controller's decisions through the same value.
    """

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # Bumped at every change of this state (the znode's version in ZooKeeper, Kafka's
    # partition epoch): an ISR change proposed against an older one is refused.
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionState, ...]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

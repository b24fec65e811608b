"""The embedded single-node metadata store: state in a JSON file in the data directory.

The file is ``odradek-metadata.json`` in the first log directory, replaced atomically
(write to a temporary file, fsync, rename, fsync the directory) on every change, so a crash
leaves either the old or the new state and never a torn one. Every partition is led by this
broker at leader epoch 0 with itself as the only replica and the whole ISR.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from odradek.metadata.model import BrokerInfo, PartitionState, TopicMetadata
from odradek.security.acl import (
    AccessControlEntry,
    ResourcePattern,
    acl_path,
    decode_acls,
    encode_acls,
    pattern_of_acl_path,
)
from odradek.metadata.store import (
    AclsChanged,
    BrokerConfigChanged,
    EntityConfigsChanged,
    MetadataStore,
    PartitionsAdded,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    UnknownTopicError,
    new_cluster_id,
)

METADATA_FILE = "odradek-metadata.json"
_FORMAT_VERSION = 1


class LocalMetadataStore(MetadataStore):
    def __init__(self, directory: Path, broker: BrokerInfo, cluster_id: str | None = None) -> None:
        super().__init__()
        self._path = directory / METADATA_FILE
        self._broker = broker
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._broker_configs: dict[str, str] = {}
        self._cluster_default_configs: dict[str, str] = {}
        self._entity_configs: dict[str, dict[str, str]] = {}
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # The first producer id never reserved: ids below it may be in use by producers.
        self._next_producer_id = 0
        directory.mkdir(parents=True, exist_ok=True)
        if self._path.exists():
            self._load()
        else:
            self._cluster_id = cluster_id or new_cluster_id()
            self._save()

    # -- persistence -------------------------------------------------------------------

    def _load(self) -> None:
        state = json.loads(self._path.read_text())
        self._cluster_id = state["cluster_id"]
        self._broker_configs = dict(state.get("broker_configs", {}))
        self._cluster_default_configs = dict(state.get("cluster_default_broker_configs", {}))
        self._next_producer_id = state.get("next_producer_id", 0)
        self._entity_configs = {entity: dict(configs) for entity, configs
                                in state.get("entity_configs", {}).items()}
        # ACLs as ZooKeeper holds them: Kafka's znode path -> its JSON
        self._acls = {pattern_of_acl_path(path): decode_acls(json.dumps(value).encode())
                      for path, value in state.get("acls", {}).items()}
        for entry in state["topics"]:
            self._put(
                TopicMetadata(
                    name=entry["name"],
                    topic_id=uuid.UUID(entry["topic_id"]),
                    partitions=self._partition_states(entry["partitions"]),
                    configs=dict(entry["configs"]),
                )
            )

    def _save(self) -> None:
        state = {
            "version": _FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "broker_configs": self._broker_configs,
            "cluster_default_broker_configs": self._cluster_default_configs,
            "next_producer_id": self._next_producer_id,
            "entity_configs": self._entity_configs,
            "acls": {acl_path(pattern): json.loads(encode_acls(entries))
                     for pattern, entries in self._acls.items()},
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": len(t.partitions),
                    "configs": t.configs,
                }
                for t in self._topics.values()
            ],
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _partition_states(self, count: int, start: int = 0) -> tuple[PartitionState, ...]:
        me = self._broker.node_id
        return tuple(PartitionState(p, me, 0, (me,), (me,)) for p in range(start, count))

    def _put(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _require(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        return topic

    # -- reads -------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._broker.node_id

    def brokers(self) -> tuple[BrokerInfo, ...]:
        return (self._broker,)

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def broker_configs(self, *, cluster_default: bool = False) -> dict[str, str]:
        return dict(self._cluster_default_configs if cluster_default else self._broker_configs)

    def entity_configs(self) -> dict[str, dict[str, str]]:
        return {entity: dict(configs) for entity, configs in self._entity_configs.items()}

    def acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self._acls)

    # -- changes -----------------------------------------------------------------------

    async def alter_acls(self, pattern: ResourcePattern, *,
                         add: frozenset[AccessControlEntry] = frozenset(),
                         remove: frozenset[AccessControlEntry] = frozenset()
                         ) -> frozenset[AccessControlEntry]:
        before = self._acls.get(pattern, frozenset())
        after = (before | add) - remove
        if after == before:
            return after
        if after:
            self._acls[pattern] = after
        else:
            del self._acls[pattern]
        self._save()
        self._publish(AclsChanged(pattern, after))
        return after

    async def set_entity_configs(self, entity: str, configs: dict[str, str]) -> None:
        if configs:
            self._entity_configs[entity] = dict(configs)
        else:
            self._entity_configs.pop(entity, None)
        self._save()
        self._publish(EntityConfigsChanged(entity, dict(configs)))

    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
        *, assignment: dict[int, tuple[int, ...]] | None = None,
    ) -> TopicMetadata:
        if name in self._topics:
            raise TopicExistsError(name)
        topic = TopicMetadata(name, uuid.uuid4(), self._partition_states(num_partitions), dict(configs))
        self._put(topic)
        self._save()
        self._publish(TopicCreated(topic))
        return topic

    async def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._require(name)
        del self._topics[name]
        del self._by_id[topic.topic_id]
        self._save()
        self._publish(TopicDeleted(topic))
        return topic

    async def create_partitions(
        self, name: str, total_count: int, *, assignments: list[tuple[int, ...]] | None = None
    ) -> TopicMetadata:
        topic = self._require(name)
        previous = len(topic.partitions)
        added = self._partition_states(total_count, start=previous)
        updated = TopicMetadata(topic.name, topic.topic_id, topic.partitions + added, topic.configs)
        self._put(updated)
        self._save()
        self._publish(PartitionsAdded(updated, previous))
        return updated

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        topic = self._require(name)
        updated = TopicMetadata(topic.name, topic.topic_id, topic.partitions, dict(configs))
        self._put(updated)
        self._save()
        self._publish(TopicConfigChanged(updated))
        return updated

    async def set_broker_configs(
        self, configs: dict[str, str], *, cluster_default: bool = False
    ) -> None:
        if cluster_default:
            self._cluster_default_configs = dict(configs)
        else:
            self._broker_configs = dict(configs)
        self._save()
        self._publish(BrokerConfigChanged(dict(configs), cluster_default))

    async def allocate_producer_ids(self, count: int) -> range:
        block = range(self._next_producer_id, self._next_producer_id + count)
        # Advanced before the save: should it fail, the block is skipped, never handed out.
        self._next_producer_id = block.stop
        self._save()
        return block

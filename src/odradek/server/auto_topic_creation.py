"""``AutoTopicCreationManager``: topics a request creates because it needs them.

A Metadata request for an unknown topic creates it with the broker's defaults
(``num.partitions``, ``default.replication.factor``) when ``auto.create.topics.enable``
allows; the first request that needs a group coordinator creates ``__consumer_offsets``,
with ``offsets.topic.num.partitions`` partitions, replication factor
``min(offsets.topic.replication.factor, live brokers)`` and Kafka's compacted configs, as
Kafka's manager of the same name does. Topics are created through the metadata store, whose
event makes the broker create their logs and lead them (and the group coordinator load the
``__consumer_offsets`` partitions led here).
"""

from __future__ import annotations

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC, offsets_topic_configs
from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import MetadataStore, TopicExistsError
from odradek.server.config import BrokerConfig


class AutoTopicCreationManager:
    def __init__(self, metadata: MetadataStore, config: BrokerConfig) -> None:
        self._metadata = metadata
        self._config = config

    async def create_topic(self, name: str) -> TopicMetadata:
        """``name`` with the broker's defaults, or ``__consumer_offsets`` with its own."""
        if name == OFFSETS_TOPIC:
            return await self.offsets_topic()
        return await self._metadata.create_topic(
            name, self._config.get("num.partitions"),
            self._config.get("default.replication.factor"), {})

    async def offsets_topic(self) -> TopicMetadata:
        """``__consumer_offsets``, created the first time it is needed."""
        store = self._metadata
        topic = store.topic(OFFSETS_TOPIC)
        if topic is None:
            get = self._config.get
            try:
                topic = await store.create_topic(
                    OFFSETS_TOPIC, get("offsets.topic.num.partitions"),
                    min(get("offsets.topic.replication.factor"), len(store.brokers())),
                    offsets_topic_configs(get))
            except TopicExistsError:  # created by a request that got here first
                topic = store.topic(OFFSETS_TOPIC)
        return topic

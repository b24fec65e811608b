"""``AutoTopicCreationManager``: topics a request creates because it needs them.

A Metadata request for an unknown topic creates it with the broker's defaults
(``num.partitions``, ``default.replication.factor``) when ``auto.create.topics.enable``
allows; the first request that needs a group coordinator creates ``__consumer_offsets``,
with ``offsets.topic.num.partitions`` partitions, replication factor
``offsets.topic.replication.factor`` (in a cluster, not before that many brokers are up; a
single broker creates it with replication factor 1) and Kafka's compacted configs, as
Kafka's manager of the same name does; the first that needs a transaction coordinator
creates ``__transaction_state`` the same way, from the ``transaction.state.log.*``
configs, and the first share group that reads its state creates ``__share_group_state``
from the ``share.coordinator.state.topic.*`` configs. Topics are created through the metadata store, whose
event makes the broker create their logs and lead them (and the group coordinator load the
``__consumer_offsets`` partitions led here).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC, offsets_topic_configs
from odradek.coordinator.share.coordinator import SHARE_STATE_TOPIC, share_state_topic_configs
from odradek.coordinator.transaction.log_records import (
    TRANSACTION_STATE_TOPIC,
    transaction_state_topic_configs,
)
from odradek.metadata.model import TopicMetadata
from odradek.metadata.store import MetadataStore, TopicExistsError
from odradek.server.config import BrokerConfig


class AutoTopicCreationManager:
    def __init__(self, metadata: MetadataStore, config: BrokerConfig) -> None:
        self._metadata = metadata
        self._config = config

    async def create_topic(self, name: str) -> TopicMetadata | None:
        """``name`` with the broker's defaults, or an internal topic with its own (None
        while it cannot be created)."""
        if name == OFFSETS_TOPIC:
            return await self.offsets_topic()
        if name == TRANSACTION_STATE_TOPIC:
            return await self.transaction_state_topic()
        if name == SHARE_STATE_TOPIC:
            return await self.share_state_topic()
        try:
            return await self._metadata.create_topic(
                name, self._config.get("num.partitions"),
                self._config.get("default.replication.factor"), {})
        except TopicExistsError:
            # Created meanwhile by another request (in a cluster, perhaps on another broker,
            # and not yet visible here: then the client is told to ask again).
            return self._metadata.topic(name)

    async def offsets_topic(self) -> TopicMetadata | None:
        """``__consumer_offsets``, created the first time it is needed; None while it
        cannot be (COORDINATOR_NOT_AVAILABLE: the client asks again)."""
        get = self._config.get
        return await self._internal_topic(
            OFFSETS_TOPIC, get("offsets.topic.num.partitions"),
            get("offsets.topic.replication.factor"), lambda _: offsets_topic_configs(get))

    async def transaction_state_topic(self) -> TopicMetadata | None:
        """``__transaction_state``, created the first time it is needed; None while it
        cannot be."""
        get = self._config.get
        return await self._internal_topic(
            TRANSACTION_STATE_TOPIC, get("transaction.state.log.num.partitions"),
            get("transaction.state.log.replication.factor"),
            lambda replicas: transaction_state_topic_configs(get, replication_factor=replicas))

    async def share_state_topic(self) -> TopicMetadata | None:
        """``__share_group_state``, created the first time a share group needs it; None
        while it cannot be."""
        get = self._config.get
        return await self._internal_topic(
            SHARE_STATE_TOPIC, get("share.coordinator.state.topic.num.partitions"),
            get("share.coordinator.state.topic.replication.factor"),
            lambda replicas: share_state_topic_configs(get, replication_factor=replicas))

    async def _internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Callable[[int], dict[str, str]]) -> TopicMetadata | None:
        """``configs`` gives the topic's configs for the replication factor it gets."""
        store = self._metadata
        topic = store.topic(name)
        if topic is None:
            live = len(store.brokers())
            if self._config.get("zookeeper.connect") and live < replication_factor:
                # In a cluster, as in Kafka: not created until enough brokers are up, so
                # that it is not created less replicated than asked, for good.
                return None
            replicas = min(replication_factor, live)
            try:
                topic = await store.create_topic(name, partitions, replicas, configs(replicas))
            except TopicExistsError:  # created by a request that got here first
                topic = store.topic(name)
        return topic

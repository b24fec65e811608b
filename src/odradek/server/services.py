"""``Services``: what request handlers may use, each a narrow service, never the Broker.

A handler declares the services it needs as parameters after ``(ctx, request)``, named after
the fields below::

    @handles(ApiKey.DESCRIBE_CLUSTER)
    def handle_describe_cluster(ctx: RequestContext, request, metadata: MetadataStore):

and the dispatcher binds them once, when it loads the handlers (``handlers.bind``). A
handler's signature is thus the list of what it can reach, and a test can hand it fakes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from odradek.controller.controller import Controller
from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.manager import SharePartitionManager
from odradek.coordinator.transaction import TransactionCoordinator
from odradek.metadata.store import MetadataStore
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.auto_topic_creation import AutoTopicCreationManager
from odradek.server.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class Services:
    config: BrokerConfig
    metadata: MetadataStore
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    auto_topic_creation: AutoTopicCreationManager
    # ShareFetch and ShareAcknowledge on the partitions led here (share groups, KIP-932).
    share_partitions: SharePartitionManager
    # The durable state of share-partitions in __share_group_state.
    share_coordinator: ShareCoordinator
    # The controller election this broker takes part in (a cluster only; None on one node).
    controller: Controller | None = None


SERVICE_NAMES = frozenset(f.name for f in fields(Services))

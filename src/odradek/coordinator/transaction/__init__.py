"""The transaction coordinator (KIP-98, with KIP-890's transactions v2): producer ids and
epochs of transactional ids, their transactions, kept in ``__transaction_state``.

Modules, from the bottom: ``metadata`` (the state table, a transactional id's metadata and its
prepared transitions), ``log_records`` (record formats and the id's partition),
``state_manager`` (transactional ids in memory and in the topic: loading, writes, timeouts,
expiration), ``coordinator`` (the entry point: InitProducerId, AddPartitionsToTxn, EndTxn,
verification, markers and completion, admin), then those that reach the log and other
brokers: ``replica_store`` (the topic through the replica manager), ``marker_channel``
(writing the markers) and ``verification`` (a partition leader asking the coordinator about a
transactional write).
"""

from odradek.coordinator.transaction.coordinator import (
    ListTransactionsResult,
    MarkerWriter,
    TransactionCoordinator,
    TransactionDescription,
)
from odradek.coordinator.transaction.log_records import (
    TRANSACTION_STATE_TOPIC,
    transaction_state_topic_configs,
)
from odradek.coordinator.transaction.state_manager import (
    TransactionLogStore,
    TransactionStateManager,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "ListTransactionsResult",
    "MarkerWriter",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionLogStore",
    "TransactionStateManager",
    "transaction_state_topic_configs",
]

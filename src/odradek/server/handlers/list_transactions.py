"""ListTransactions (key 66): the transactional ids this broker coordinates (KIP-664),
filtered by state, by producer id and (v1, KIP-994) by how long their transaction has run.
An admin client asks every broker and merges the answers, as ``odradek transactions list``
does. State filters that name no state are returned in ``unknown_state_filters``. Only the
ids the principal may DESCRIBE are listed, the others left out without an error (Kafka's
``KafkaApis.handleListTransactionsRequest``).
"""

from __future__ import annotations

from odradek.coordinator.transaction import TransactionCoordinator
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import RequestContext, handles

NO_DURATION_FILTER = -1


@handles(ApiKey.LIST_TRANSACTIONS)
def handle_list_transactions(ctx: RequestContext, request,
                             transaction_coordinator: TransactionCoordinator) -> object:
    listed = transaction_coordinator.list_transactions(
        set(request.state_filters), set(request.producer_id_filters),
        getattr(request, "duration_filter", NO_DURATION_FILTER))
    describable = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                       (t.transactional_id for t in listed.transactions))
    return ctx.respond(
        error_code=listed.error, unknown_state_filters=list(listed.unknown_state_filters),
        transaction_states=[{"transactional_id": t.transactional_id,
                             "producer_id": t.producer_id,
                             "transaction_state": t.state}
                            for t in listed.transactions if t.transactional_id in describable])

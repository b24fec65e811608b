"""EndTxn (key 26): a producer commits or aborts its ongoing transaction (KIP-98).

The coordinator writes PREPARE_COMMIT or PREPARE_ABORT to ``__transaction_state`` and
answers; the markers then go to every partition of the transaction, and COMPLETE_COMMIT or
COMPLETE_ABORT follows. From v5 (transactions v2, KIP-890) every end bumps the producer's
epoch, and the answer carries the producer id and epoch to use next, so that a write of
the ended transaction arriving late is refused as coming from an older epoch. Needs WRITE
on the transactional id (see ``txn_requests``): refused, the transaction is left as it is.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction import TransactionCoordinator
from odradek.protocol.api import ApiKey
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.producer_fenced import fenced_as_known
from odradek.server.handlers.txn_requests import producer_error

TRANSACTIONS_V2_MIN_VERSION = 5
PRODUCER_FENCED_MIN_VERSION = 2  # KIP-588


@handles(ApiKey.END_TXN)
def handle_end_txn(ctx: RequestContext, request,
                   transaction_coordinator: TransactionCoordinator) -> object:
    refused = producer_error(ctx, request.transactional_id)
    if refused is not ErrorCode.none:
        return ctx.respond(error_code=refused, producer_id=NO_PRODUCER_ID,
                           producer_epoch=NO_PRODUCER_EPOCH)
    completion: Completion[tuple[ErrorCode, int, int]] = Completion()
    transaction_coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed,
        2 if ctx.api_version >= TRANSACTIONS_V2_MIN_VERSION else 1,
        lambda error, producer_id, producer_epoch: completion(
            (error, producer_id, producer_epoch)))
    return completion.then(lambda result: ctx.respond(
        error_code=fenced_as_known(result[0], ctx.api_version, PRODUCER_FENCED_MIN_VERSION),
        producer_id=result[1] if result[0] is ErrorCode.none else NO_PRODUCER_ID,
        producer_epoch=result[2] if result[0] is ErrorCode.none else NO_PRODUCER_EPOCH))

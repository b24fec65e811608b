"""InitProducerId (key 22): a producer id and epoch for an idempotent producer (KIP-98).

Every id comes from the metadata store, in blocks reserved durably, so no id is handed out
twice, restarts included. As in Kafka's ``TransactionCoordinator.handleInitProducerId``, a
request without a transactional id always gets a fresh id at epoch 0, even when it carries
its current id and epoch (v3+, KIP-360): an idempotent producer bumps its epoch itself, and
the broker's producer state accepts the higher epoch at sequence 0. Only transactional ids
have an epoch the broker bumps, and those wait for the transaction coordinator.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.server.handlers import RequestContext, handles

log = logging.getLogger(__name__)


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, request,
                                  metadata: MetadataStore) -> object:
    # v3+ (KIP-360): an id without an epoch, or an epoch without an id, is malformed
    # (KafkaApis.handleInitProducerIdRequest).
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    producer_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ctx, ErrorCode.invalid_request)
    if request.transactional_id == "":
        return _error(ctx, ErrorCode.invalid_request)  # Kafka: empty is not null
    if request.transactional_id is not None:
        # No transaction coordinator runs here yet. Kafka answers a transactional id whose
        # coordinator is not active with COORDINATOR_NOT_AVAILABLE; clients retry after a
        # FindCoordinator, which this broker does not serve, so they fail with a clear
        # "unsupported" error instead of a misleading authorization failure.
        return _error(ctx, ErrorCode.coordinator_not_available)
    try:
        new_producer_id = await metadata.generate_producer_id()
    except OSError as e:
        # The block could not be reserved (the metadata file cannot be written). Kafka's
        # ProducerIdManager answers COORDINATOR_LOAD_IN_PROGRESS while it has no block: a
        # retriable error, so the producer tries again.
        log.error("could not reserve producer ids: %s", e)
        return _error(ctx, ErrorCode.coordinator_load_in_progress)
    return ctx.respond(error_code=ErrorCode.none, producer_id=new_producer_id, producer_epoch=0)


def _error(ctx: RequestContext, error: ErrorCode) -> object:
    return ctx.respond(error_code=error, producer_id=NO_PRODUCER_ID,
                       producer_epoch=NO_PRODUCER_EPOCH)

"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional
producer (KIP-98).

Every id comes from the metadata store, in blocks reserved durably, so no id is handed out
twice, restarts included. As in Kafka's ``TransactionCoordinator.handleInitProducerId``, a
request without a transactional id always gets a fresh id at epoch 0, even when it carries
its current id and epoch (v3+, KIP-360): an idempotent producer bumps its epoch itself, and
the broker's producer state accepts the higher epoch at sequence 0. A transactional id goes
to its transaction coordinator (this broker must lead the id's partition of
``__transaction_state``), which keeps one producer id per transactional id and bumps its
epoch at every InitProducerId, fencing the previous instance of the producer (a zombie), and
aborting the transaction it left open.

Who may ask (Kafka's ``KafkaApis.handleInitProducerIdRequest``), before anything else: with
a transactional id, a principal that may WRITE it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
otherwise, see ``txn_requests``); without one, an idempotent producer, a principal that may
IDEMPOTENT_WRITE on the cluster or WRITE to some topic (KIP-679: WRITE on any topic implies
idempotent writes to it), CLUSTER_AUTHORIZATION_FAILED otherwise. A refused request reserves
no producer id and fences no producer.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from odradek.coordinator.transaction import TransactionCoordinator
from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.completion import Completion
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.authorization import authorize_cluster
from odradek.server.handlers.producer_fenced import fenced_as_known
from odradek.server.handlers.txn_requests import producer_error

PRODUCER_FENCED_MIN_VERSION = 4  # KIP-588

log = logging.getLogger(__name__)


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, request, metadata: MetadataStore,
                                  transaction_coordinator: TransactionCoordinator) -> object:
    refused = _refusal(ctx, request.transactional_id)
    if refused is not ErrorCode.none:
        return _error(ctx, refused)
    # v3+ (KIP-360): an id without an epoch, or an epoch without an id, is malformed
    # (KafkaApis.handleInitProducerIdRequest).
    producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    producer_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ctx, ErrorCode.invalid_request)
    if request.transactional_id == "":
        return _error(ctx, ErrorCode.invalid_request)  # Kafka: empty is not null
    if request.transactional_id is not None:
        completion: Completion[tuple[ErrorCode, int, int]] = Completion()
        transaction_coordinator.init_producer_id(
            request.transactional_id, millis(request.transaction_timeout), producer_id,
            producer_epoch, lambda error, pid, epoch: completion((error, pid, epoch)))
        error, new_producer_id, new_epoch = await completion.wait()
        error = fenced_as_known(error, ctx.api_version, PRODUCER_FENCED_MIN_VERSION)
        if error is not ErrorCode.none:
            return _error(ctx, error)
        return ctx.respond(error_code=error, producer_id=new_producer_id,
                           producer_epoch=new_epoch)
    try:
        new_producer_id = await metadata.generate_producer_id()
    except OSError as e:
        # The block could not be reserved (the metadata file cannot be written). Kafka's
        # ProducerIdManager answers COORDINATOR_LOAD_IN_PROGRESS while it has no block: a
        # retriable error, so the producer tries again.
        log.error("could not reserve producer ids: %s", e)
        return _error(ctx, ErrorCode.coordinator_load_in_progress)
    return ctx.respond(error_code=ErrorCode.none, producer_id=new_producer_id, producer_epoch=0)


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode:
    if transactional_id is not None:
        return producer_error(ctx, transactional_id)
    if authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE) \
            or ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC):
        return ErrorCode.none
    return ErrorCode.cluster_authorization_failed


def _error(ctx: RequestContext, error: ErrorCode) -> object:
    return ctx.respond(error_code=error, producer_id=NO_PRODUCER_ID,
                       producer_epoch=NO_PRODUCER_EPOCH)

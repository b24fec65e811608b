"""What the requests a transactional producer sends about its transaction share: who may
send them. Not a handler module: it registers nothing.

As Kafka's ``KafkaApis`` checks them, before the transaction coordinator sees the request:

1. InitProducerId with a transactional id, AddPartitionsToTxn up to v3, AddOffsetsToTxn,
   EndTxn and TxnOffsetCommit need WRITE on the transactional id:
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise. The producer id and epoch are not
   authorized on their own: WRITE on the transactional id implies them.
2. Then AddOffsetsToTxn and TxnOffsetCommit, which bring a consumer group's offsets into
   the transaction, need READ on that group: GROUP_AUTHORIZATION_FAILED otherwise.

What each request then needs of topics is the handler's. The requests brokers send each
other about transactions (AddPartitionsToTxn v4+, WriteTxnMarkers) are authorized on the
cluster instead, in their handlers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.security.acl import AclOperation, ResourceType
from odradek.server.request_context import RequestContext


def producer_error(ctx: RequestContext, transactional_id: str,
                   group_id: str | None = None) -> ErrorCode:
    """The error refusing the request of ``transactional_id``'s producer (with ``group_id``'s
    offsets, if any), or NONE."""
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    if group_id is not None and not ctx.authorize(AclOperation.READ, ResourceType.GROUP,
                                                  group_id):
        return ErrorCode.group_authorization_failed
    return ErrorCode.none

"""PRODUCER_FENCED as versions older than KIP-588 know it. Not a handler module: it
registers nothing.

KIP-588 (Kafka 2.7) gave fenced transactional producers their own error, PRODUCER_FENCED;
the request versions before it only know INVALID_PRODUCER_EPOCH, which Kafka's
``KafkaApis`` answers them instead: InitProducerId before v4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn before v2.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def fenced_as_known(error: ErrorCode, version: int, first_version_knowing_it: int
                    ) -> ErrorCode:
    if error is ErrorCode.producer_fenced and version < first_version_knowing_it:
        return ErrorCode.invalid_producer_epoch
    return error

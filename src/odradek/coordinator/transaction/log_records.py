"""``__transaction_state``: which partition holds a transactional id, and its records, byte
for byte Kafka's, so that Kafka's tools read odradek's topic and odradek reads Kafka's.

* A transactional id lives in partition ``Utils.abs(transactionalId.hashCode) %
  partitionCount``, the rule of ``__consumer_offsets`` (Java's ``String.hashCode``).
* Keys and values are Kafka's schemas (``TransactionLogKey.json`` and
  ``TransactionLogValue.json`` in Kafka's ``transaction-coordinator`` module), each prefixed by
  its int16 version, written here with ``struct`` as kio does not ship them. Integers are
  big-endian.

Key, TransactionLogKey version 0::

    version          int16   0
    transactionalId  string  int16 length, UTF-8

Value, TransactionLogValue version 1, the first flexible version (KIP-482): a compact string
or array is prefixed by an unsigned varint of its length + 1 (0 for null; 7 bits a byte,
least significant first, the high bit set on every byte but the last), and each struct ends
with its tagged fields::

    version                 int16   1
    producerId              int64
    producerEpoch           int16
    transactionTimeoutMs    int32
    transactionStatus       int8    the TransactionState id
    transactionPartitions   compact array, null in state Empty; per topic:
      topic                 compact string
      partitionIds          compact array of int32
      tagged fields         uvarint count (0)
    lastUpdateTimestampMs   int64
    startTimestampMs        int64   -1 before the transaction's first partition
    tagged fields           uvarint count, then per field: uvarint tag, uvarint size, value;
                            a field at its default is left out
      tag 0  PreviousProducerId        int64   default -1
      tag 1  NextProducerId            int64   default -1
      tag 2  ClientTransactionVersion  int16   default 0

Version 0 has the same fields without the tagged ones, with int16-length strings and
int32-count arrays (-1 for null); it is read, never written. Tags this broker does not know
(Kafka's later ones) are skipped. A record with a null value (a tombstone) deletes its
transactional id; the topic is compacted, so the last record of each id is its state.

Example: transactional id "t", producer 7 at epoch 0, 60 s timeout, Ongoing with partition
t-0, started and last updated at ms 1000, client transaction version 2::

    key    00 00 | 00 01 74
    value  00 01 | 00 00 00 00 00 00 00 07 | 00 00 | 00 00 ea 60 | 01
           | 02 (one topic) 02 74 (t) 02 (one partition) 00 00 00 00 00 (no tags)
           | 00 00 00 00 00 00 03 e8 | 00 00 00 00 00 00 03 e8
           | 01 (one tag) 02 (tag 2) 02 (two bytes) 00 02
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from odradek.coordinator.group import offsets_topic
from odradek.coordinator.transaction.metadata import (
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from odradek.protocol.topic_partition import TopicPartition, partitions_by_topic

TRANSACTION_STATE_TOPIC = "__transaction_state"

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 1
_VALUE_VERSIONS = (0, 1)
_FIRST_FLEXIBLE_VERSION = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class TransactionLogRecordError(ValueError):
    """A record of ``__transaction_state`` this broker cannot read."""


def partition_for(transactional_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    return offsets_topic.partition_for(transactional_id, partition_count)


def transaction_state_topic_configs(config: Callable[[str], Any], *,
                                    replication_factor: int) -> dict[str, str]:
    """The topic configs Kafka creates ``__transaction_state`` with
    (``TransactionStateManager.transactionTopicConfigs``). ``min.insync.replicas`` is
    ``transaction.state.log.min.isr``, at most ``replication_factor``: Kafka does not cap it,
    and a single broker (replication factor 1, min ISR 2 by default) refuses every write."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(min(config("transaction.state.log.min.isr"),
                                       replication_factor)),
        "segment.bytes": str(config("transaction.state.log.segment.bytes")),
    }


# -- encoding --------------------------------------------------------------------------


class _Writer:
    def __init__(self, version: int) -> None:
        self.out = bytearray(_INT16.pack(version))

    def pack(self, fmt: struct.Struct, value: int) -> _Writer:
        self.out += fmt.pack(value)
        return self

    def uvarint(self, value: int) -> _Writer:
        while value >= 0x80:
            self.out.append(value & 0x7F | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def string(self, value: str) -> _Writer:
        encoded = value.encode()
        self.out += _INT16.pack(len(encoded)) + encoded
        return self

    def compact_string(self, value: str) -> _Writer:
        encoded = value.encode()
        self.uvarint(len(encoded) + 1).out += encoded
        return self

    def tagged_fields(self, fields: dict[int, bytes]) -> _Writer:
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag).uvarint(len(fields[tag])).out += fields[tag]
        return self


def transaction_log_key(transactional_id: str) -> bytes:
    return bytes(_Writer(TRANSACTION_LOG_KEY_VERSION).string(transactional_id).out)


def transaction_log_value(transit: TxnTransitMetadata) -> bytes:
    """TransactionLogValue version 1 (Kafka's ``TransactionLog.valueToBytes``)."""
    if transit.state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction has no partitions: {transit}")
    writer = (_Writer(TRANSACTION_LOG_VALUE_VERSION).pack(_INT64, transit.producer_id)
              .pack(_INT16, transit.producer_epoch).pack(_INT32, transit.txn_timeout_ms)
              .pack(_INT8, transit.state))
    if transit.state is TransactionState.EMPTY:
        writer.uvarint(0)  # null
    else:
        topics = partitions_by_topic(transit.topic_partitions).items()
        writer.uvarint(len(topics) + 1)
        for topic, partition_ids in topics:
            writer.compact_string(topic).uvarint(len(partition_ids) + 1)
            for partition_id in partition_ids:
                writer.pack(_INT32, partition_id)
            writer.tagged_fields({})
    tags = {}
    if transit.previous_producer_id != NO_PRODUCER_ID:
        tags[_TAG_PREVIOUS_PRODUCER_ID] = _INT64.pack(transit.previous_producer_id)
    if transit.next_producer_id != NO_PRODUCER_ID:
        tags[_TAG_NEXT_PRODUCER_ID] = _INT64.pack(transit.next_producer_id)
    if transit.client_transaction_version != 0:
        tags[_TAG_CLIENT_TRANSACTION_VERSION] = _INT16.pack(transit.client_transaction_version)
    return bytes(writer.pack(_INT64, transit.txn_last_update_timestamp_ms)
                 .pack(_INT64, transit.txn_start_timestamp_ms).tagged_fields(tags).out)


# -- decoding --------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, length: int) -> bytes:
        end = self.position + length
        if length < 0 or end > len(self.data):
            raise TransactionLogRecordError(
                f"field of {length} bytes at byte {self.position} of {len(self.data)}")
        value = self.data[self.position:end]
        self.position = end
        return value

    def unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack(self.take(fmt.size))
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise TransactionLogRecordError(f"varint too long at byte {self.position}")

    def string(self) -> str:
        return self.take(self.unpack(_INT16)).decode()

    def compact_string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            raise TransactionLogRecordError(f"null string at byte {self.position}")
        return self.take(length).decode()

    def array_count(self, flexible: bool) -> int:
        """An array's length, 0 for null: a compact length, or an int32 one (-1 for null)."""
        count = self.uvarint() - 1 if flexible else self.unpack(_INT32)
        return max(count, 0)

    def tagged_fields(self) -> dict[int, bytes]:
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}


def read_transaction_log_key(key: bytes) -> str:
    """The transactional id of a key (Kafka's ``TransactionLog.readTxnRecordKey``)."""
    reader = _Reader(key)
    version = reader.unpack(_INT16)
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise TransactionLogRecordError(f"unknown key version {version}")
    return reader.string()


def _tag(tags: dict[int, bytes], tag: int, fmt: struct.Struct, default: int) -> int:
    value = tags.get(tag)
    if value is None:
        return default
    if len(value) != fmt.size:
        raise TransactionLogRecordError(f"tag {tag} of {len(value)} bytes")
    return fmt.unpack(value)[0]


def read_transaction_log_value(transactional_id: str, value: bytes) -> TransactionMetadata:
    """A value of version 0 or 1 as the transactional id's metadata (Kafka's
    ``TransactionLog.readTxnRecordValue``); the last epoch, not kept in the log, is -1."""
    reader = _Reader(value)
    version = reader.unpack(_INT16)
    if version not in _VALUE_VERSIONS:
        raise TransactionLogRecordError(
            f"TransactionLogValue version {version}; this broker reads {_VALUE_VERSIONS}")
    flexible = version >= _FIRST_FLEXIBLE_VERSION
    producer_id = reader.unpack(_INT64)
    producer_epoch = reader.unpack(_INT16)
    txn_timeout_ms = reader.unpack(_INT32)
    status = reader.unpack(_INT8)
    try:
        state = TransactionState(status)
    except ValueError:
        raise TransactionLogRecordError(f"unknown transaction status {status}") from None
    partitions: set[TopicPartition] = set()
    for _ in range(reader.array_count(flexible)):
        topic = reader.compact_string() if flexible else reader.string()
        partitions.update(TopicPartition(topic, reader.unpack(_INT32))
                          for _ in range(reader.array_count(flexible)))
        if flexible:
            reader.tagged_fields()
    last_update_ms = reader.unpack(_INT64)
    start_ms = reader.unpack(_INT64)
    tags = reader.tagged_fields() if flexible else {}
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        previous_producer_id=_tag(tags, _TAG_PREVIOUS_PRODUCER_ID, _INT64, NO_PRODUCER_ID),
        next_producer_id=_tag(tags, _TAG_NEXT_PRODUCER_ID, _INT64, NO_PRODUCER_ID),
        producer_epoch=producer_epoch,
        txn_timeout_ms=txn_timeout_ms,
        state=state,
        # Kafka ignores the partitions of an Empty transaction.
        topic_partitions=set() if state is TransactionState.EMPTY else partitions,
        txn_start_timestamp_ms=start_ms,
        txn_last_update_timestamp_ms=last_update_ms,
        client_transaction_version=_tag(tags, _TAG_CLIENT_TRANSACTION_VERSION, _INT16, 0),
    )

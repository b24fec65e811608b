"""Kafka requests without a client library, for what no client sends on purpose: a gap in
the sequences, a batch retried after a broker restart, a record timestamp out of bounds, a
transactional write arriving after its transaction ended.

kio messages of the requested version over a plain socket, every receive bounded::

    with RawClient(broker.port) as raw:
        init = raw.request(ApiKey.INIT_PRODUCER_ID, 5, transactional_id=None,
                           transaction_timeout=60_000)
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.messages import build

# On loopback an answer takes milliseconds; this only bounds a broken broker.
RECV_TIMEOUT_SECONDS = 10.0
# Record errors since v8 (KIP-467); from v12 a transactional write adds its partition to
# its transaction (KIP-890).
PRODUCE_VERSION = 9
INIT_PRODUCER_ID_VERSION = 5
FIND_COORDINATOR_VERSION = 4  # the first with a batch of keys (KIP-699)
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7
# The replica id of a Fetch or ListOffsets that a client, not a follower, sends.
CONSUMER_REPLICA_ID = -1
# Big enough for every batch a test writes to one partition.
FETCH_MAX_BYTES = 1024 * 1024
TRANSACTIONAL_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
# A coordinator's topic is created and loaded in milliseconds; this bounds a broken broker.
COORDINATOR_WAIT_SECONDS = 10.0
COORDINATOR_POLL_SECONDS = 0.02
# What a client asks again after: the coordinator is being created or loaded, or is busy
# ending the previous transaction.
RETRIABLE_COORDINATOR_ERRORS = (
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions)
_SIZE = struct.Struct(">i")


class RawClient:
    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=RECV_TIMEOUT_SECONDS)
        self._correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._sock.close()

    def request(self, api_key: ApiKey, version: int, **body: Any) -> Any:
        """Sends one request (``body`` as for `odradek.protocol.messages.build`) and returns
        the decoded response body."""
        self._correlation_id += 1
        cls = request_class(api_key, version)
        header_cls = cls.__header_schema__
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header_cls(
            request_api_key=api_key, request_api_version=version,
            correlation_id=self._correlation_id, client_id="raw-client"))
        entity_writer(cls)(buffer, build(cls, **body))
        payload = buffer.getvalue()
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(self._recv_exactly(4))
        frame = self._recv_exactly(size)
        response_cls = response_class(api_key, version)
        header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        assert header.correlation_id == self._correlation_id
        response, _ = entity_reader(response_cls)(frame, offset)
        return response

    def authenticate_plain(self, username: str, password: str) -> None:
        """SASL/PLAIN on a SASL listener: SaslHandshake v1, then the credentials in one
        SaslAuthenticate (KIP-152), as clients authenticate; raises if refused."""
        handshake = self.request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert handshake.error_code == ErrorCode.none, handshake
        authenticated = self.request(ApiKey.SASL_AUTHENTICATE, 2,
                                     auth_bytes=f"\0{username}\0{password}".encode())
        assert authenticated.error_code == ErrorCode.none, authenticated

    def init_producer_id(self, version: int = INIT_PRODUCER_ID_VERSION, **fields: Any) -> Any:
        body = {"transactional_id": None, "transaction_timeout": 60_000} | fields
        return self.request(ApiKey.INIT_PRODUCER_ID, version, **body)

    def init_transactional_id(self, transactional_id: str, **fields: Any) -> Any:
        """InitProducerId of ``transactional_id`` (``fields`` as for :meth:`init_producer_id`)
        once its coordinator is found, asked again while the answer is retriable, as a client
        does; returns the last answer."""
        found = self.wait_for_coordinator(transactional_id, key_type=TRANSACTIONAL_KEY_TYPE)
        assert found.error_code == ErrorCode.none, found
        deadline = time.monotonic() + COORDINATOR_WAIT_SECONDS
        while (response := self.init_producer_id(transactional_id=transactional_id, **fields)
               ).error_code in RETRIABLE_COORDINATOR_ERRORS:
            _pause_before_retry(deadline, response)
        return response

    def wait_for_coordinator(self, key: str, *, key_type: int = 0) -> Any:
        """FindCoordinator of ``key`` until the answer is not retriable (the first one
        creates the coordinator's topic); returns it."""
        deadline = time.monotonic() + COORDINATOR_WAIT_SECONDS
        while (found := self.find_coordinator(key, key_type=key_type)
               ).error_code in RETRIABLE_COORDINATOR_ERRORS:
            _pause_before_retry(deadline, found)
        return found

    def produce(self, topic: str, records: bytes, *, partition: int = 0,
                version: int = PRODUCE_VERSION, transactional_id: str | None = None) -> Any:
        """Produces one batch with acks=all; returns that partition's response."""
        response = self.request(
            ApiKey.PRODUCE, version, transactional_id=transactional_id, acks=-1, timeout=10_000,
            topic_data=[{"name": topic,
                         "partition_data": [{"index": partition, "records": records}]}])
        [topic_response] = response.responses
        [partition_response] = topic_response.partition_responses
        return partition_response

    def find_coordinator(self, key: str, *, key_type: int = 0) -> Any:
        """The coordinator of a group (key type 0) or a transactional id (1): node id, host,
        port and error."""
        response = self.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                                key_type=key_type, coordinator_keys=[key])
        [coordinator] = response.coordinators
        return coordinator

    def fetch(self, topic: str, offset: int, *, partition: int = 0,
              isolation_level: int = 0, replica_id: int = CONSUMER_REPLICA_ID) -> Any:
        """One partition's Fetch response from ``offset``, without waiting for data;
        isolation level 0 is read_uncommitted, 1 read_committed. A ``replica_id`` of 0 or
        more fetches as that broker's follower would."""
        response = self.request(
            ApiKey.FETCH, FETCH_VERSION, replica_id=replica_id, max_wait=0, min_bytes=0,
            max_bytes=FETCH_MAX_BYTES,
            isolation_level=isolation_level, session_id=0, session_epoch=-1,
            topics=[{"topic": topic, "partitions": [{"partition": partition,
                                                     "fetch_offset": offset,
                                                     "partition_max_bytes": FETCH_MAX_BYTES}]}],
            forgotten_topics_data=[], rack_id="")
        [topic_response] = response.responses
        [partition_response] = topic_response.partitions
        return partition_response

    def list_offset(self, topic: str, timestamp: int, *, partition: int = 0,
                    isolation_level: int = 0) -> Any:
        """One partition's ListOffsets answer for ``timestamp`` (-1 latest, -2 earliest)."""
        response = self.request(
            ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, replica_id=CONSUMER_REPLICA_ID,
            isolation_level=isolation_level,
            topics=[{"name": topic, "partitions": [{"partition_index": partition,
                                                    "timestamp": timestamp}]}])
        [topic_response] = response.topics
        [partition_response] = topic_response.partitions
        return partition_response

    def _recv_exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError(f"closed after {len(data)} of {count} bytes")
            data += chunk
        return bytes(data)


def _pause_before_retry(deadline: float, answer: Any) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"no coordinator within {COORDINATOR_WAIT_SECONDS} s: {answer}")
    time.sleep(COORDINATOR_POLL_SECONDS)

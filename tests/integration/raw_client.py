"""Kafka requests without a client library, for what no client sends on purpose: a gap in
the sequences, a batch retried after a broker restart, a record timestamp out of bounds.

kio messages of the requested version over a plain socket, every receive bounded::

    with RawClient(broker.port) as raw:
        init = raw.request(ApiKey.INIT_PRODUCER_ID, 5, transactional_id=None,
                           transaction_timeout=60_000)
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from odradek.protocol.api import ApiKey, request_class, response_class
from odradek.protocol.messages import build

# On loopback an answer takes milliseconds; this only bounds a broken broker.
RECV_TIMEOUT_SECONDS = 10.0
PRODUCE_VERSION = 9  # the newest served: carries record errors (KIP-467)
INIT_PRODUCER_ID_VERSION = 5
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

    def init_producer_id(self, version: int = INIT_PRODUCER_ID_VERSION, **fields: Any) -> Any:
        body = {"transactional_id": None, "transaction_timeout": 60_000} | fields
        return self.request(ApiKey.INIT_PRODUCER_ID, version, **body)

    def produce(self, topic: str, records: bytes, *, partition: int = 0) -> Any:
        """Produces one batch with acks=all; returns that partition's response."""
        response = self.request(
            ApiKey.PRODUCE, PRODUCE_VERSION, transactional_id=None, acks=-1, timeout=10_000,
            topic_data=[{"name": topic,
                         "partition_data": [{"index": partition, "records": records}]}])
        [topic_response] = response.responses
        [partition_response] = topic_response.partition_responses
        return partition_response

    def _recv_exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError(f"closed after {len(data)} of {count} bytes")
            data += chunk
        return bytes(data)

"""Kafka requests the CLI sends itself, over ``odradek.client.BrokerConnection``, for the
APIs librdkafka has no call for (reassignments, transactions): one connection per request,
bounded in time, and broker errors worded for a person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError
from kio.schema.errors import ErrorCode

from odradek.cli.client import CONNECTION_SETUP_TIMEOUT_MS, REQUEST_TIMEOUT_SECONDS
from odradek.client.connection import BrokerConnection

# A little over the request's own timeout, so that the broker's answer is what we report.
SEND_TIMEOUT_S = REQUEST_TIMEOUT_SECONDS + 2
CLIENT_ID = "odradek-cli"


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int


def kafka_error_name(code: ErrorCode) -> str:
    return code.name.upper()  # kio's names are Kafka's, in lower case


def error_reason(code: ErrorCode) -> str:
    """librdkafka's description of a broker error, for answers that carry no message."""
    return KafkaError(int(code)).str().removeprefix("Broker: ")


def describe_error(code: ErrorCode, message: str | None) -> str:
    return f"{message or error_reason(code)} ({kafka_error_name(code)})"


async def exchange(broker: BrokerAddress, request: Any) -> Any:
    """Sends ``request`` to ``broker`` on a connection of its own and returns the answer."""
    connection = await BrokerConnection.open(
        broker.host, broker.port, client_id=CLIENT_ID,
        connect_timeout_s=CONNECTION_SETUP_TIMEOUT_MS / 1000)
    try:
        return await connection.send(request, timeout_s=SEND_TIMEOUT_S)
    finally:
        connection.close()

"""A broker that authenticates and authorizes: SASL/PLAIN users on a SASL_PLAINTEXT listener
and the ACL authorizer, with ``User:admin`` as its super user; and what each user's clients
are configured with.

    broker = secured_broker(tmp_path).start()
    producer = confluent_kafka.Producer(librdkafka(broker, "alice"))
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from odradek.testing.embedded import EmbeddedBroker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LISTENER = "SASL_PLAINTEXT"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
TIMEOUT_SECONDS = 20


def secured_broker(directory: Path, **configs: Any) -> EmbeddedBroker:
    """A broker (not started) whose one listener is SASL_PLAINTEXT with the PLAIN users of
    ``USERS``, Kafka's ACL authorizer and ``User:admin`` as super user."""
    return EmbeddedBroker(directory, **{
        "listeners": f"{LISTENER}://127.0.0.1:0",
        "inter.broker.listener.name": LISTENER,
        "sasl.enabled.mechanisms": "PLAIN",
        f"listener.name.{LISTENER.lower()}.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        **configs,
    })


def security(client: str, user: str) -> dict[str, Any]:
    """How a client authenticates as ``user``, in the client's own names: librdkafka's
    properties for confluent-kafka and kcat, keyword arguments for kafka-python and aiokafka
    (what conftest's client adapters take as ``security``)."""
    if client in ("confluent-kafka", "kcat"):
        return {"security.protocol": LISTENER, "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user]}
    return {"security_protocol": LISTENER, "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def librdkafka(broker: EmbeddedBroker, user: str, **configs: Any) -> dict[str, Any]:
    """confluent-kafka's (and kcat's) config of a client authenticating as ``user``."""
    return {"bootstrap.servers": broker.bootstrap_servers,
            **security("confluent-kafka", user), **configs}


def python_client(broker: EmbeddedBroker, user: str, **configs: Any) -> dict[str, Any]:
    """kafka-python's and aiokafka's keyword arguments for a client authenticating as
    ``user``."""
    return {"bootstrap_servers": broker.bootstrap_servers, **security("kafka-python", user),
            **configs}


def admin(broker: EmbeddedBroker, user: str = "admin") -> AdminClient:
    return AdminClient(librdkafka(broker, user))


def grant(broker: EmbeddedBroker, principal: str, operation: AclOperation,
          resource_type: ResourceType, name: str, *,
          pattern_type: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW, host: str = "*") -> None:
    """Creates one ACL as the super user, as ``kafka-acls.sh --add`` would."""
    binding = AclBinding(resource_type, name, pattern_type, principal, host, operation,
                         permission)
    client = admin(broker)  # kept until the result is in: a destroyed client fails its futures
    for future in client.create_acls([binding], request_timeout=TIMEOUT_SECONDS).values():
        future.result(TIMEOUT_SECONDS)

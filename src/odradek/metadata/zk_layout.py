"""Where cluster metadata lives in ZooKeeper, and how each znode is written.

The layout and the JSON are Kafka's own (ZooKeeper mode, 2.x–3.x), so Kafka's
documentation and ``zkCli.sh`` explain a running odradek cluster::

    /cluster/id                              {"version": "1", "id": <cluster id>}
    /controller                  ephemeral   {"version": 1, "brokerid": 1, "timestamp": ...}
    /controller_epoch                        "7"
    /brokers/ids/<id>            ephemeral   {"version": 5, "host", "port", "endpoints",
                                              "listener_security_protocol_map", "rack", ...}
    /brokers/topics/<topic>                  {"version": 3, "topic_id", "partitions":
                                              {"0": [1, 2, 3]}, "adding_replicas",
                                              "removing_replicas"}
    /brokers/topics/<topic>/partitions/<p>/state
                                             {"version": 1, "controller_epoch", "leader",
                                              "leader_epoch", "isr": [1, 2, 3]}
    /config/topics/<topic>                   {"version": 1, "config": {...}}
    /config/brokers/<id> and /config/brokers/<default>
    /config/users/<user>, /config/clients/<client id>, /config/users/<user>/clients/<client id>
                                             {"version": 1, "config": {...}}: SCRAM
                                              credentials and quotas (<default> too)
    /admin/delete_topics/<topic>             a topic the controller is asked to delete
    /latest_producer_id_block                {"version": 1, "broker", "block_start",
                                              "block_end"}

One path is odradek's: ``/odradek/controlled_shutdown/<id>``, where a stopping broker asks
the controller to move its leaderships (Kafka's ControlledShutdown request, which Kafka 4
removed from its protocol). A partition state znode's version is the partition epoch.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass

from odradek.metadata.model import BrokerInfo, Endpoint, PartitionState

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
# + an entity path: users/<user>[/clients/<client id>], clients/<id>, groups/<group id>
ENTITY_CONFIGS = "/config"
USER_CONFIGS = "/config/users"
CLIENT_CONFIGS = "/config/clients"
DEFAULT_BROKER_CONFIG = "<default>"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLED_SHUTDOWN = "/odradek/controlled_shutdown"

# Created at start by whoever gets there first; the rest of the tree is created on use.
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, TOPIC_CONFIGS, BROKER_CONFIGS, USER_CONFIGS,
                    CLIENT_CONFIGS, DELETE_TOPICS, CONTROLLED_SHUTDOWN)

NO_LEADER = -1


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def entity_config_path(entity: str) -> str:
    return f"{ENTITY_CONFIGS}/{entity}"


def broker_config_path(node_id: int | None) -> str:
    return f"{BROKER_CONFIGS}/{DEFAULT_BROKER_CONFIG if node_id is None else node_id}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def controlled_shutdown_path(node_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{node_id}"


def _dump(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


# -- brokers ---------------------------------------------------------------------------


def encode_broker(broker: BrokerInfo, security_protocols: dict[str, str]) -> bytes:
    first = broker.endpoints[0]
    return _dump({
        "version": 5,
        "host": first.host,
        "port": first.port,
        "endpoints": [f"{e.name}://{e.host}:{e.port}" for e in broker.endpoints],
        "listener_security_protocol_map": {e.name: security_protocols.get(e.name, e.name)
                                           for e in broker.endpoints},
        "rack": broker.rack,
        "jmx_port": -1,
        "features": {},
        "timestamp": str(time.time_ns() // 1_000_000),
    })


def decode_broker(node_id: int, data: bytes) -> BrokerInfo:
    value = json.loads(data)
    endpoints = []
    for text in value["endpoints"]:
        name, _, address = text.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append(Endpoint(name, host.strip("[]"), int(port)))
    return BrokerInfo(node_id, tuple(endpoints), value.get("rack"))


# -- the controller --------------------------------------------------------------------


def encode_controller(node_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": node_id,
                  "timestamp": str(time.time_ns() // 1_000_000)})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


# -- topics and partitions -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: the topic's id and each partition's replicas, with the
    replicas a reassignment is adding and removing."""

    topic_id: uuid.UUID
    replicas: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]


def encode_assignment(assignment: TopicAssignment) -> bytes:
    def as_json(mapping: dict[int, tuple[int, ...]]) -> dict[str, list[int]]:
        return {str(p): list(replicas) for p, replicas in sorted(mapping.items())}

    return _dump({
        "version": 3,
        "topic_id": _topic_id_text(assignment.topic_id),
        "partitions": as_json(assignment.replicas),
        "adding_replicas": as_json(assignment.adding),
        "removing_replicas": as_json(assignment.removing),
    })


def decode_assignment(data: bytes) -> TopicAssignment:
    value = json.loads(data)

    def from_json(mapping: dict[str, list[int]] | None) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(replicas) for p, replicas in (mapping or {}).items()}

    return TopicAssignment(
        topic_id=_topic_id_from_text(value["topic_id"]),
        replicas=from_json(value["partitions"]),
        adding=from_json(value.get("adding_replicas")),
        removing=from_json(value.get("removing_replicas")),
    )


def _topic_id_text(topic_id: uuid.UUID) -> str:
    # Kafka writes topic ids base64url without padding (Uuid.toString).
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def _topic_id_from_text(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """``/brokers/topics/<topic>/partitions/<p>/state``."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_leader_and_isr(state: LeaderAndIsr) -> bytes:
    return _dump({"version": 1, "controller_epoch": state.controller_epoch,
                  "leader": state.leader, "leader_epoch": state.leader_epoch,
                  "isr": list(state.isr)})


def decode_leader_and_isr(data: bytes) -> LeaderAndIsr:
    value = json.loads(data)
    return LeaderAndIsr(value["leader"], value["leader_epoch"], tuple(value["isr"]),
                        value["controller_epoch"])


def partition_state(partition: int, replicas: tuple[int, ...], state: LeaderAndIsr,
                    znode_version: int) -> PartitionState:
    return PartitionState(partition, state.leader, state.leader_epoch, replicas, state.isr,
                          partition_epoch=znode_version)


# -- configs ---------------------------------------------------------------------------


def encode_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": configs})


def decode_config(data: bytes) -> dict[str, str]:
    return dict(json.loads(data).get("config", {})) if data else {}


# -- cluster id and producer ids -------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


def encode_producer_id_block(broker: int, start: int, end: int) -> bytes:
    """``block_end`` is inclusive, as Kafka writes it."""
    return _dump({"version": 1, "broker": broker, "block_start": str(start),
                  "block_end": str(end)})


def decode_producer_id_block_end(data: bytes) -> int:
    """The last id of the latest reserved block (-1 when none was reserved yet)."""
    return int(json.loads(data)["block_end"]) if data else -1

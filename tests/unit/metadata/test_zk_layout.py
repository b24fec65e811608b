"""The znodes are written in Kafka's JSON and read back unchanged."""

from __future__ import annotations

import json
import uuid

from odradek.metadata import zk_layout as layout
from odradek.metadata.model import BrokerInfo, Endpoint


def test_a_broker_registration_round_trips_with_kafkas_fields():
    broker = BrokerInfo(3, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),
                            Endpoint("INTERNAL", "10.0.0.3", 9093)), "rack-b")
    data = layout.encode_broker(broker, {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"})
    value = json.loads(data)
    assert value["endpoints"] == ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://10.0.0.3:9093"]
    assert (value["host"], value["port"], value["rack"]) == ("127.0.0.1", 9092, "rack-b")
    assert layout.decode_broker(3, data) == broker


def test_a_topic_assignment_round_trips():
    assignment = layout.TopicAssignment(uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1)},
                                        {1: (3,)}, {})
    data = layout.encode_assignment(assignment)
    assert json.loads(data)["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]}
    assert layout.decode_assignment(data) == assignment


def test_a_partition_state_round_trips():
    state = layout.LeaderAndIsr(leader=2, leader_epoch=7, isr=(2, 3), controller_epoch=4)
    data = layout.encode_leader_and_isr(state)
    assert json.loads(data) == {"version": 1, "controller_epoch": 4, "leader": 2,
                                "leader_epoch": 7, "isr": [2, 3]}
    assert layout.decode_leader_and_isr(data) == state


def test_configs_controller_cluster_id_and_producer_ids():
    assert layout.decode_config(layout.encode_config({"retention.ms": "10"})) == {
        "retention.ms": "10"}
    assert layout.decode_config(b"") == {}
    assert layout.decode_controller(layout.encode_controller(5)) == 5
    assert layout.decode_cluster_id(layout.encode_cluster_id("abc")) == "abc"
    assert layout.decode_producer_id_block_end(
        layout.encode_producer_id_block(1, 1000, 1999)) == 1999
    assert layout.decode_producer_id_block_end(b"") == -1

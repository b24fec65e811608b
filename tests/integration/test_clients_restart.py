"""What a client wrote is what it reads after the broker restarts on the same data."""

from __future__ import annotations


def by_position(messages):
    return sorted(messages, key=lambda m: (m.partition, m.offset))


def test_records_and_timestamps_survive_a_restart_and_offsets_continue_after_it(
        client, odradek_broker, create_topic):
    topic = create_topic("durable", partitions=2, message_timestamp_type="LogAppendTime")
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2}
               for i in range(6)]
    client.produce(odradek_broker.bootstrap_servers, topic, records)
    before = client.consume(odradek_broker.bootstrap_servers, topic, 6, partitions=(0, 1))

    odradek_broker.restart()  # on a new port: clients bootstrap again
    bootstrap = odradek_broker.bootstrap_servers
    client.produce(bootstrap, topic, [{"key": b"later", "value": b"v6", "partition": 1}])
    after = client.consume(bootstrap, topic, 7, partitions=(0, 1))

    [later] = [m for m in after if m.key == b"later"]
    assert by_position(m for m in after if m is not later) == by_position(before)
    assert (later.partition, later.offset) == (1, 3)

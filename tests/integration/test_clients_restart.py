"""What a client wrote is what it reads after the broker restarts on the same data."""

from __future__ import annotations

import logging
import time


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


def test_after_a_clean_restart_every_partition_serves_while_the_logs_load_behind(
        client, odradek_broker, create_topic, caplog):
    partitions = 40
    topic = create_topic("many", partitions=partitions)
    client.produce(odradek_broker.bootstrap_servers, topic,
                   [{"value": f"before-{p}".encode(), "partition": p}
                    for p in range(partitions)])

    with caplog.at_level(logging.INFO, logger="odradek"):
        odradek_broker.restart()
        bootstrap = odradek_broker.bootstrap_servers
        client.produce(bootstrap, topic, [{"value": f"after-{p}".encode(), "partition": p}
                                          for p in range(partitions)])
        got = client.consume(bootstrap, topic, 2 * partitions, partitions=range(partitions))
        deadline = time.monotonic() + 10
        while not (loaded := [r.getMessage() for r in caplog.records
                              if "deferred at startup" in r.getMessage()]) \
                and time.monotonic() < deadline:
            time.sleep(0.05)

    assert sorted((m.partition, m.offset, m.value) for m in got) == sorted(
        [(p, 0, f"before-{p}".encode()) for p in range(partitions)]
        + [(p, 1, f"after-{p}".encode()) for p in range(partitions)])
    # The start opened the logs without reading them; requests and the loader did.
    [opened] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("opened")]
    assert f"{partitions} to load on first use or in the background" in opened
    assert loaded, "the background loader never finished"
    assert all(odradek_broker.broker.log_manager.get(topic, p).loaded
               for p in range(partitions))

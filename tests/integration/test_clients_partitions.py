"""Many records over several partitions all come back once, each partition in order."""

from __future__ import annotations

PARTITIONS = 3
COUNT = 10_000


def test_many_records_across_partitions_come_back_complete_in_order_without_duplicates(
        client, bootstrap, create_topic):
    topic = create_topic("spread", partitions=PARTITIONS)
    # Record i goes to partition i % 3; sent partition by partition, so that kcat runs once
    # per partition (-p) rather than once per record.
    records = [{"key": f"k{i}".encode(), "value": str(i).encode(), "partition": partition}
               for partition in range(PARTITIONS) for i in range(partition, COUNT, PARTITIONS)]

    client.produce(bootstrap, topic, records)
    consumed = client.consume(bootstrap, topic, COUNT, partitions=range(PARTITIONS))

    for partition in range(PARTITIONS):
        received = [m for m in consumed if m.partition == partition]
        expected = list(range(partition, COUNT, PARTITIONS))
        assert [m.offset for m in received] == list(range(len(expected)))
        assert [int(m.value) for m in received] == expected

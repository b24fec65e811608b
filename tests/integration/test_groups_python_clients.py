"""Consumer groups run with kafka-python and aiokafka, each test once per client in a group
of its own: members share a topic's partitions, a member killed without leaving loses them
to the others after its session timeout without losing a record, and a member that stops
polling loses them after max.poll.interval.ms."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator

import confluent_kafka.admin
import pytest
from group_members import (
    BROKER_CONFIGS,
    AIOKafkaMember,
    BackgroundMember,
    DoomedMember,
    EventLoopThread,
    KafkaPythonMember,
    committed_offsets,
    owns_all,
    produce,
    wait_until,
)

pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS)

PARTITIONS = 6

# The killed member: prints each record, processes it for PROCESSING_SECONDS (so that it is
# killed with records of its partitions left to consume) and commits it synchronously.
DOOMED_SESSION_TIMEOUT_MS = 2000
PROCESSING_SECONDS = 0.02
_DOOMED_CONFIG = (f'client_id="doomed", auto_offset_reset="earliest", enable_auto_commit=False,'
                  f' session_timeout_ms={DOOMED_SESSION_TIMEOUT_MS}, heartbeat_interval_ms=300')
DOOMED_SCRIPTS = {
    "kafka-python": f"""
import sys, time, kafka, kafka.errors
consumer = kafka.KafkaConsumer(sys.argv[3], bootstrap_servers=sys.argv[1],
                               group_id=sys.argv[2], {_DOOMED_CONFIG})
owned = None
while True:
    for tp, records in consumer.poll(timeout_ms=50).items():
        for record in records:
            print("consumed", record.value.decode(), flush=True)
            time.sleep({PROCESSING_SECONDS})
            try:
                consumer.commit({{tp: kafka.OffsetAndMetadata(record.offset + 1, "", -1)}})
            except kafka.errors.CommitFailedError:
                pass  # a rebalance: the partition's next owner consumes the record again
    if owned != (owned := sorted(tp.partition for tp in consumer.assignment())):
        print("assigned", *owned, flush=True)
""",
    "aiokafka": f"""
import asyncio, sys, aiokafka, aiokafka.errors
async def main():
    consumer = aiokafka.AIOKafkaConsumer(sys.argv[3], bootstrap_servers=sys.argv[1],
                                         group_id=sys.argv[2], {_DOOMED_CONFIG})
    await consumer.start()
    owned = None
    while True:
        for tp, records in (await consumer.getmany(timeout_ms=50)).items():
            for record in records:
                print("consumed", record.value.decode(), flush=True)
                await asyncio.sleep({PROCESSING_SECONDS})
                try:
                    await consumer.commit({{tp: record.offset + 1}})
                except aiokafka.errors.CommitFailedError:
                    pass  # a rebalance: the partition's next owner consumes the record again
        if owned != (owned := sorted(tp.partition for tp in consumer.assignment())):
            print("assigned", *owned, flush=True)
asyncio.run(main())
""",
}

StartMember = Callable[..., BackgroundMember]


@pytest.fixture(params=sorted(DOOMED_SCRIPTS))
def python_client(request) -> str:
    return request.param


@pytest.fixture
def start_member(python_client, bootstrap) -> Iterator[StartMember]:
    """Starts a member of the client's group (``start_member(group, topic, name,
    **config)``, with kafka-python's and aiokafka's parameter names); closes every member at
    the end, raising what a member's loop raised."""
    with contextlib.ExitStack() as started:
        loop = None
        if python_client == "aiokafka":
            loop = EventLoopThread()
            started.callback(loop.close)

        def start(group: str, topic: str, name: str, **config) -> BackgroundMember:
            if loop is None:
                member = KafkaPythonMember(bootstrap, group, topic, name, **config)
            else:
                member = AIOKafkaMember(loop, bootstrap, group, topic, name, **config)
            started.callback(member.close)
            return member

        yield start


def polled_values(*members: BackgroundMember) -> set[bytes]:
    return {value for member in members for value in member.values}


def position(value: bytes) -> tuple[int, int]:
    """(partition, offset) of a record ``produce()`` sent to a new topic: r<i> went to
    partition i % PARTITIONS."""
    index = int(value[1:])
    return index % PARTITIONS, index // PARTITIONS


def test_members_share_the_partitions_of_their_group(python_client, start_member, bootstrap,
                                                      create_topic):
    topic = create_topic(f"{python_client}-group", partitions=PARTITIONS)
    values = produce(bootstrap, topic, PARTITIONS, 120)
    members = [start_member(f"{python_client}-sharing", topic, f"m{i}") for i in range(2)]

    wait_until(lambda: polled_values(*members) >= values
               and all(len(m.owned) == PARTITIONS // 2 for m in members), what="sharing")

    assert sorted(members[0].owned | members[1].owned) == list(range(PARTITIONS))
    assert not members[0].owned & members[1].owned
    assert polled_values(*members) == values


def test_a_killed_members_partitions_move_after_its_session_timeout_and_no_record_is_lost(
        python_client, start_member, bootstrap, create_topic):
    group = f"{python_client}-killing"
    topic = create_topic(f"{python_client}-survivors", partitions=PARTITIONS)
    doomed = DoomedMember(DOOMED_SCRIPTS[python_client], bootstrap, group, topic)
    try:
        survivors = [start_member(group, topic, f"m{i}") for i in range(2)]
        wait_until(owns_all([doomed, *survivors], PARTITIONS), what="three members")
        values = produce(bootstrap, topic, PARTITIONS, 300)
        wait_until(lambda: len(doomed.consumed) >= 20, what="the doomed member consuming")
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        committed = [committed_offsets(admin, group, topic, PARTITIONS)]
        doomed_owned = doomed.owned
        assert any(committed[0][p] > 0 for p in doomed_owned)  # its commits are in

        doomed.kill()  # no LeaveGroup: only its session can end it
        moved_after = wait_until(owns_all(survivors, PARTITIONS), what="its partitions moving")
        wait_until(lambda: values <= polled_values(*survivors) | set(doomed.consumed),
                   what="every record consumed")

        assert moved_after < DOOMED_SESSION_TIMEOUT_MS / 1000 + 3.0  # and slack
        taken_over = [position(v) for v in polled_values(*survivors)
                      if position(v)[0] in doomed_owned]
        assert taken_over  # the killed member had records left to consume
        # Its partitions were resumed where it had committed, not from their start.
        assert all(offset >= committed[0][p] for p, offset in taken_over)
        log_end = {p: len(values) // PARTITIONS for p in range(PARTITIONS)}
        wait_until(lambda: committed.append(committed_offsets(admin, group, topic, PARTITIONS))
                   or committed[-1] == log_end, what="every record committed")
        for earlier, later in itertools.pairwise(committed):  # never backwards
            assert all(later[p] >= earlier[p] for p in range(PARTITIONS)), (earlier, later)
    finally:
        doomed.close()


def test_a_member_that_stops_polling_loses_its_partitions_after_max_poll_interval(
        python_client, start_member, create_topic):
    topic = create_topic(f"{python_client}-stalled", partitions=PARTITIONS)
    # Sessions shorter than the poll interval: the stalled member's heartbeats keep it in
    # the group until its client notices that the application stopped polling.
    config = {"session_timeout_ms": 2000, "max_poll_interval_ms": 4000}
    active, stalled = (start_member(f"{python_client}-stalling", topic, name, **config)
                       for name in ("active", "stalled"))
    wait_until(owns_all([active, stalled], PARTITIONS))

    stalled.stall()
    stalled_at = time.monotonic()
    wait_until(lambda: active.owned == set(range(PARTITIONS)),
               what="the stalled member's partitions moving")

    assert time.monotonic() - stalled_at >= 3.5  # not before max.poll.interval.ms

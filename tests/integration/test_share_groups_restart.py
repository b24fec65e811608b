"""Share groups (KIP-932) across a broker restart: their membership is read back from
``__consumer_offsets``, so every group is still listed, with its group epoch, and a member
that stayed attached carries on under its member id, without losing or getting again a
record it acknowledged."""

from __future__ import annotations

from conftest import create_topic as create_topic_on
from group_members import GROUP_TIMEOUT_SECONDS, wait_until
from kio.schema.errors import ErrorCode
from raw_client import RawClient
from test_cli import Cli
from test_share_groups import (
    ACCEPT,
    accept_below,
    poll_until_some,
    produce,
    restartable_broker,
    share_consumer,
)

from odradek.protocol.api import ApiKey

RECORDS = 20


def describe(port: int, group: str):
    """ShareGroupDescribe of one group, asked again while its coordinator is loading."""
    answers: list = []

    def described() -> bool:
        with RawClient(port) as raw:
            [answer] = raw.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=[group],
                                   include_authorized_operations=False).groups
        answers.append(answer)
        return answer.error_code == ErrorCode.none

    wait_until(described, what=f"ShareGroupDescribe of {group}")
    return answers[-1]


def pass_through(port: int, group: str, topic: str) -> None:
    """A member joins the group and leaves it without fetching anything (a share consumer
    acquires records as soon as it polls), with ShareGroupHeartbeats sent by hand: the
    group epoch moves on twice."""
    with RawClient(port) as raw:
        for epoch, topics in ((0, [topic]), (-1, None)):
            answer = raw.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group,
                                 member_id="passing", member_epoch=epoch, rack_id=None,
                                 subscribed_topic_names=topics)
            assert answer.error_code == ErrorCode.none, answer


def acknowledged_offsets(consumer) -> list[int]:
    """One poll, every record of it accepted; the records' offsets."""
    messages = [m for m in consumer.poll(0.2) if not m.error()]
    for message in messages:
        consumer.acknowledge(message, ACCEPT)
    return [m.offset() for m in messages]


def test_share_groups_and_their_members_outlive_a_broker_restart(tmp_path):
    with restartable_broker(tmp_path) as broker:
        port, bootstrap = broker.port, broker.bootstrap_servers
        topic = create_topic_on(broker, "jobs")
        produce(bootstrap, topic, RECORDS)
        drained = share_consumer(bootstrap, "drained", topic)
        poll_until_some(drained)
        drained.close()  # its member leaves: an empty group
        worker = share_consumer(bootstrap, "workers", topic, explicit=True)
        try:
            accepted = accept_below(worker, 10)
            pass_through(port, "workers", topic)
            before = describe(port, "workers")
            assert (before.group_state, before.group_epoch, len(before.members)) == (
                "Stable", 3, 1)
            assert accepted

            broker.restart()

            # Read back from __consumer_offsets: the same epoch and member.
            after = describe(port, "workers")
            assert after.group_epoch == before.group_epoch
            assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
            listed = [line.split() for line in Cli(bootstrap).lines("share-groups", "list")]
            assert ["workers", "Stable"] in listed and ["drained", "Empty"] in listed

            got: list[int] = []
            wait_until(lambda: set(got) >= set(range(RECORDS)) - accepted,
                       what="the records not accepted before the restart",
                       step=lambda: got.extend(acknowledged_offsets(worker)))
            worker.commit_sync(GROUP_TIMEOUT_SECONDS)
            assert not accepted & set(got)  # nothing accepted came again
            carried_on = describe(port, "workers")
            assert carried_on.group_epoch == before.group_epoch  # nobody joined again
            assert [m.member_id for m in carried_on.members] == [
                m.member_id for m in before.members]
        finally:
            worker.close()

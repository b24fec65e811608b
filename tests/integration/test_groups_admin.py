"""Consumer groups through admin tools: confluent-kafka's AdminClient (what Kafka UIs and
the CLI use) and kafka-python's KafkaAdminClient where only it offers an API
(OffsetDelete); and the corners of the group APIs no client reaches on purpose."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect

import confluent_kafka
import kafka.admin
import kafka.errors
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from group_members import BROKER_CONFIGS, GROUP_TIMEOUT_SECONDS, Member, owns_all, poll_until
from kio.schema.errors import ErrorCode

from odradek.coordinator.group.offsets_topic import OFFSETS_TOPIC
from odradek.protocol.api import SUPPORTED_APIS, ApiKey, request_class
from odradek.protocol.framing import encode_response
from odradek.protocol.messages import build

pytestmark = pytest.mark.odradek_config(**BROKER_CONFIGS)

PARTITIONS = 4


def settle(futures: dict) -> dict:
    return {key: future.result(GROUP_TIMEOUT_SECONDS) for key, future in futures.items()}


def committed(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    [result] = settle(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])).values()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


@pytest.fixture
def admin(bootstrap) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def running_group(bootstrap, create_topic):
    """Two members sharing "watched", Stable."""
    topic = create_topic("watched", partitions=PARTITIONS)
    members = [Member(bootstrap, "observed", topic, f"m{i}") for i in range(2)]
    poll_until(members, owns_all(members, PARTITIONS))
    yield members
    for member in members:
        member.close()


def test_a_running_group_is_listed_and_described_with_its_members_and_assignment(
        admin, running_group):
    listed = admin.list_consumer_groups().result(GROUP_TIMEOUT_SECONDS).valid
    assert [(g.group_id, g.state, g.is_simple_consumer_group) for g in listed] == [
        ("observed", ConsumerGroupState.STABLE, False)]
    empty_only = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY})
    assert empty_only.result(GROUP_TIMEOUT_SECONDS).valid == []

    [described] = settle(admin.describe_consumer_groups(["observed"])).values()

    assert described.state is ConsumerGroupState.STABLE
    assert described.partition_assignor == "range"
    assert sorted(m.client_id for m in described.members) == ["m0", "m1"]
    assert {m.host for m in described.members} == {"/127.0.0.1"}
    assigned = sorted(tp.partition for m in described.members
                      for tp in m.assignment.topic_partitions)
    assert assigned == list(range(PARTITIONS))


def test_an_unknown_group_is_described_as_dead(admin):
    [described] = settle(admin.describe_consumer_groups(["nobody"])).values()
    assert described.state is ConsumerGroupState.DEAD


def test_offsets_of_an_empty_group_can_be_altered_and_a_consumer_resumes_there(
        admin, bootstrap, create_topic):
    topic = create_topic("rewound", partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, value=str(i).encode())
    producer.flush(GROUP_TIMEOUT_SECONDS)

    settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "rewinding", [TopicPartition(topic, 0, 7)])]))

    assert committed(admin, "rewinding") == {(topic, 0): 7}
    member = Member(bootstrap, "rewinding", topic, "resumed")
    try:
        poll_until([member], lambda: len(member.records) == 3)
        assert [m.offset() for m in member.records] == [7, 8, 9]
        # With a member in it, the group's offsets are its members' to commit.
        [refused] = settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "rewinding", [TopicPartition(topic, 0, 0)])])).values()
        assert refused.topic_partitions[0].error.code() == (
            confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID)
    finally:
        member.close()


def test_a_group_with_members_cannot_be_deleted_and_an_empty_one_is_forgotten(
        admin, running_group):
    with pytest.raises(confluent_kafka.KafkaException, match="NON_EMPTY_GROUP"):
        settle(admin.delete_consumer_groups(["observed"]))
    for member in running_group:
        member.close()
    settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "observed", [TopicPartition("watched", 0, 1)])]))

    settle(admin.delete_consumer_groups(["observed"]))

    assert admin.list_consumer_groups().result(GROUP_TIMEOUT_SECONDS).valid == []
    assert set(committed(admin, "observed").values()) <= {-1001}  # librdkafka: no offset
    with pytest.raises(confluent_kafka.KafkaException, match="GROUP_ID_NOT_FOUND"):
        settle(admin.delete_consumer_groups(["observed"]))


def test_offsets_of_a_topic_the_group_reads_are_kept_while_others_can_be_deleted(
        bootstrap, create_topic, running_group, admin):
    other = create_topic("other", partitions=1)
    settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "offsets-only", [TopicPartition(other, 0, 1)])]))
    kafka_admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deleted = kafka_admin.delete_group_offsets(
            "observed", [kafka.TopicPartition("watched", 0), kafka.TopicPartition(other, 0)])
        assert deleted[kafka.TopicPartition("watched", 0)] is (
            kafka.errors.GroupSubscribedToTopicError)
        assert deleted[kafka.TopicPartition(other, 0)] is kafka.errors.NoError  # not read

        kafka_admin.delete_group_offsets("offsets-only", [kafka.TopicPartition(other, 0)])
        assert set(committed(admin, "offsets-only").values()) <= {-1001}
    finally:
        kafka_admin.close()


def test_a_deleted_topics_offsets_are_forgotten_and_its_namesake_starts_without_them(
        admin, odradek_broker, create_topic):
    kept, recreated = create_topic("kept", partitions=1), create_topic("recreated", partitions=2)
    settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("forgetting", [
        TopicPartition(kept, 0, 5), TopicPartition(recreated, 0, 7),
        TopicPartition(recreated, 1, 9)])]))

    settle(admin.delete_topics([recreated], operation_timeout=GROUP_TIMEOUT_SECONDS))
    create_topic(recreated, partitions=2)

    assert committed(admin, "forgetting") == {(kept, 0): 5}
    odradek_broker.restart()
    restarted = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    assert committed(restarted, "forgetting") == {(kept, 0): 5}  # tombstones, not just memory


def test_consumer_offsets_is_an_internal_compacted_topic_created_by_the_first_group(
        admin, bootstrap, running_group):
    assert OFFSETS_TOPIC in admin.list_topics(timeout=GROUP_TIMEOUT_SECONDS).topics
    kafka_admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [described] = kafka_admin.describe_topics([OFFSETS_TOPIC])
    finally:
        kafka_admin.close()
    assert described["is_internal"] is True
    assert len(described["partitions"]) == BROKER_CONFIGS["offsets_topic_num_partitions"]
    resource = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC)
    [configs] = settle(admin.describe_configs([resource])).values()
    assert configs["cleanup.policy"].value == "compact"


# -- the corners, request by request -----------------------------------------------------


def call(embedded, api_key: ApiKey, version: int, **body):
    """Calls the broker's handler as its dispatcher would, and checks the response encodes."""
    return call_with(embedded, api_key, version, build(request_class(api_key, version), **body))


def call_with(embedded, api_key: ApiKey, version: int, request, wait_seconds: float = 10.0):
    """The response, or None if the request is still waiting after ``wait_seconds`` (a
    JoinGroup in a rebalance), as a client whose request timed out sees it."""
    async def handle():
        outcome = embedded.handle(api_key, version, request)
        if not inspect.isawaitable(outcome):
            return outcome
        try:
            return await asyncio.wait_for(outcome, wait_seconds)
        except TimeoutError:
            return None

    response = embedded.call(handle())
    if response is not None:
        encode_response(1, response)
    return response


GROUP_APIS = (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
              ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH,
              ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
              ApiKey.OFFSET_DELETE)
GROUP_VERSIONS = [(key, version) for key in GROUP_APIS
                  for version in range(SUPPORTED_APIS[key].min_version,
                                       SUPPORTED_APIS[key].max_version + 1)]


# Ids and names from a small alphabet and timeouts mostly within the broker's bounds, so
# that fuzzed requests meet each other's groups and members and get past the first checks.
NAMES = st.sampled_from(["g", "g", "h", "", "consumer", "range"])
TIMEOUTS_MS = st.sampled_from([6000, 6000, 10000, 0, 10**9])


def narrowed(value, data):
    """``value`` (a kio request) with every string and duration redrawn from the above."""
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: narrowed(getattr(value, f.name), data)
                                             for f in dataclasses.fields(value)})
    if isinstance(value, tuple):
        return tuple(narrowed(item, data) for item in value)
    if isinstance(value, str):
        return data.draw(NAMES)
    if isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=data.draw(TIMEOUTS_MS))
    return value


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_group_request_is_answered_in_its_version_or_waits_but_never_fails(
        odradek_broker, data):
    api_key, version = data.draw(st.sampled_from(GROUP_VERSIONS))
    call(odradek_broker, ApiKey.FIND_COORDINATOR, 0, key="g")
    request = narrowed(data.draw(st.from_type(request_class(api_key, version))), data)
    call_with(odradek_broker, api_key, version, request, wait_seconds=0.05)


def test_find_coordinator_answers_a_batch_of_groups_and_a_transactional_id(odradek_broker):
    response = call(odradek_broker, ApiKey.FIND_COORDINATOR, 6, key_type=0,
                    coordinator_keys=["a", "b"])
    assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
        (key, 0, odradek_broker.port, ErrorCode.none) for key in ("a", "b")]
    transactional = call(odradek_broker, ApiKey.FIND_COORDINATOR, 3, key="tx", key_type=1)
    assert (transactional.error_code, transactional.node_id, transactional.port) == (
        ErrorCode.none, 0, odradek_broker.port)
    unknown = call(odradek_broker, ApiKey.FIND_COORDINATOR, 3, key="x", key_type=2)
    assert unknown.error_code is ErrorCode.invalid_request


def test_describe_groups_v6_says_an_unknown_group_is_not_found(odradek_broker):
    call(odradek_broker, ApiKey.FIND_COORDINATOR, 0, key="nobody")
    [old] = call(odradek_broker, ApiKey.DESCRIBE_GROUPS, 5, groups=["nobody"],
                 include_authorized_operations=False).groups
    [new] = call(odradek_broker, ApiKey.DESCRIBE_GROUPS, 6, groups=["nobody"],
                 include_authorized_operations=False).groups
    assert (old.error_code, old.group_state) == (ErrorCode.none, "Dead")
    assert (new.error_code, new.error_message) == (ErrorCode.group_id_not_found,
                                                   "Group nobody not found.")


def test_offset_commit_refuses_partitions_of_unknown_topics(odradek_broker, create_topic):
    create_topic("known", partitions=1)
    call(odradek_broker, ApiKey.FIND_COORDINATOR, 0, key="g")

    def partition(index: int) -> dict:
        return {"partition_index": index, "committed_offset": 5, "committed_metadata": None}

    response = call(odradek_broker, ApiKey.OFFSET_COMMIT, 9, group_id="g",
                    generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=[{"name": "known", "partitions": [partition(0), partition(1)]},
                            {"name": "unknown", "partitions": [partition(0)]}])
    assert [[p.error_code for p in t.partitions] for t in response.topics] == [
        [ErrorCode.none, ErrorCode.unknown_topic_or_partition],
        [ErrorCode.unknown_topic_or_partition]]


def test_group_requests_before_the_offsets_topic_exists_send_clients_to_find_it(
        odradek_broker):
    response = call(odradek_broker, ApiKey.HEARTBEAT, 4, group_id="early", generation_id=1,
                    member_id="m", group_instance_id=None)
    assert response.error_code is ErrorCode.not_coordinator


def test_clients_cannot_produce_to_the_offsets_topic(odradek_broker):
    from confluent_kafka import KafkaError, Producer

    errors = []
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers,
                         "message.timeout.ms": 5000, "log_level": 2})
    producer.produce("__consumer_offsets", b"forged", partition=0,
                     on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)

    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]

"""Who may use consumer groups, transactions and SCRAM credentials, with real clients, on one
broker that authenticates (SASL/PLAIN users admin, alice and bob) and authorizes (Kafka's ACL
authorizer, ``User:admin`` its super user).

A principal is answered what Kafka's ``KafkaApis`` answers it (GROUP_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED), learns nothing it may not describe and changes nothing it may
not change. Each test grants what it needs on names of its own; ACLs that concern a whole
principal are kept apart: bob never gets an ACL on the cluster nor WRITE on a topic (an
idempotent producer's InitProducerId asks for WRITE on any topic), and only the SCRAM test
gives alice ACLs on the cluster. The requests a test cannot have a client send at will are
sent as the broker's embedded client, ``User:ANONYMOUS``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterator

import aiokafka
import aiokafka.errors
import confluent_kafka
import kafka
import kafka.admin
import kafka.errors
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AclOperation, NewTopic, ResourcePatternType, ResourceType
from kio.schema.errors import ErrorCode
from secured import TIMEOUT_SECONDS, admin, grant, librdkafka, python_client, secured_broker

from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.security.acl import CLUSTER_NAME
from odradek.testing.embedded import EmbeddedBroker

NODE_ID = 0  # the broker's, which coordinates every group and transactional id here
PREFIXED = ResourcePatternType.PREFIXED


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    with secured_broker(tmp_path_factory.mktemp("acl-groups-transactions")) as broker:
        yield broker


# --- what the tests do as users do it ----------------------------------------------------


def settle(futures: dict) -> dict:
    """The results of a confluent-kafka admin call. Its client must be kept until then: a
    destroyed client fails its futures."""
    return {key: future.result(TIMEOUT_SECONDS) for key, future in futures.items()}


def create_topics(broker: EmbeddedBroker, *names: str) -> None:
    client = admin(broker)
    settle(client.create_topics([NewTopic(name, 1, 1) for name in names],
                                operation_timeout=TIMEOUT_SECONDS))


def produce(broker: EmbeddedBroker, topic: str, *values: bytes) -> None:
    """Writes ``values`` as the super user, and waits until they are written."""
    producer = confluent_kafka.Producer(librdkafka(broker, "admin"))
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT_SECONDS) == 0


def committed(broker: EmbeddedBroker, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as the super user sees them."""
    client = admin(broker)
    [result] = settle(client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])).values()
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def commit_as_admin(broker: EmbeddedBroker, group: str, offsets: dict[str, int]) -> None:
    """Commits offset ``offsets[topic]`` of each topic's partition 0 for ``group`` (which
    this creates, Empty), as an admin tool resets a group's offsets."""
    client = admin(broker)
    settle(client.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, offset) for topic, offset in offsets.items()])]))


def listed_groups(broker: EmbeddedBroker, user: str) -> set[str]:
    client = admin(broker, user)
    listed = client.list_consumer_groups(request_timeout=TIMEOUT_SECONDS).result(TIMEOUT_SECONDS)
    return {group.group_id for group in listed.valid}


def error_of(future) -> int:
    """The Kafka error code a confluent-kafka future fails with."""
    with pytest.raises(KafkaException) as refused:
        future.result(TIMEOUT_SECONDS)
    return refused.value.args[0].code()


def python_admin(broker: EmbeddedBroker, user: str) -> kafka.admin.KafkaAdminClient:
    return kafka.admin.KafkaAdminClient(**python_client(broker, user))


def read_committed(broker: EmbeddedBroker, topic: str, count: int) -> list[bytes]:
    """What a read_committed consumer of the super user reads from the topic's start: the
    ``count`` first values, or fewer if no more come before the deadline."""
    consumer = confluent_kafka.Consumer(librdkafka(
        broker, "admin", **{"group.id": f"reader-of-{topic}", "enable.auto.commit": False,
                            "isolation.level": "read_committed"}))
    try:
        consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        return [message.value() for message in consume(consumer, count)]
    finally:
        consumer.close()


def log_end_offset(broker: EmbeddedBroker, topic: str) -> int:
    consumer = confluent_kafka.Consumer(librdkafka(broker, "admin", **{"group.id": "watcher"}))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_SECONDS)[1]
    finally:
        consumer.close()


def consume(consumer: confluent_kafka.Consumer, count: int) -> list[confluent_kafka.Message]:
    """Up to ``count`` records, polled until the deadline; a consumer error fails the test."""
    messages: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    return messages


# --- joining a group ------------------------------------------------------------------------


def confluent_join_error(broker: EmbeddedBroker, user: str, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer(librdkafka(broker, user, **{"group.id": group}))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                return message.error().code()
        raise TimeoutError(f"{user} joined {group}")
    finally:
        consumer.close()


def kafka_python_join_error(broker: EmbeddedBroker, user: str, group: str, topic: str) -> int:
    consumer = kafka.KafkaConsumer(topic, group_id=group, **python_client(broker, user))
    try:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            try:
                consumer.poll(timeout_ms=200)
            except kafka.errors.BrokerResponseError as error:
                return error.errno
        raise TimeoutError(f"{user} joined {group}")
    finally:
        consumer.close()


def aiokafka_join_error(broker: EmbeddedBroker, user: str, group: str, topic: str) -> int:
    async def join() -> int:
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=group,
                                             **python_client(broker, user))
        try:
            await consumer.start()
            await asyncio.wait_for(consumer.getone(), TIMEOUT_SECONDS)
        except aiokafka.errors.KafkaError as error:
            return error.errno
        finally:
            await consumer.stop()
        raise AssertionError(f"{user} consumed in {group}")

    return asyncio.run(join())


JOINERS = {"confluent-kafka": confluent_join_error, "kafka-python": kafka_python_join_error,
           "aiokafka": aiokafka_join_error}


@pytest.mark.parametrize("library", JOINERS)
@pytest.mark.parametrize("group_acl", [None, AclOperation.DESCRIBE],
                         ids=["no-group-acl", "describe-only"])
def test_a_consumer_without_read_on_its_group_is_refused_group_authorization_failed(
        broker, library, group_acl):
    # No ACL: FindCoordinator refuses the group; DESCRIBE only: it is found, JoinGroup refuses.
    group, topic = f"join-{library}-{group_acl}", f"join-topic-{library}-{group_acl}"
    create_topics(broker, topic)
    grant(broker, "User:bob", AclOperation.READ, ResourceType.TOPIC, topic)
    if group_acl is not None:
        grant(broker, "User:bob", group_acl, ResourceType.GROUP, group)

    assert JOINERS[library](broker, "bob", group, topic) == ErrorCode.group_authorization_failed
    assert group not in listed_groups(broker, "admin")


# --- committed offsets -----------------------------------------------------------------------


def test_a_principal_may_not_read_another_groups_offsets_nor_learn_of_them(broker):
    create_topics(broker, "private-offsets")
    commit_as_admin(broker, "private-group", {"private-offsets": 7})
    confluent_admin, python_tool = admin(broker, "bob"), python_admin(broker, "bob")
    try:
        [fetched] = confluent_admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("private-group")]).values()
        assert error_of(fetched) == KafkaError.GROUP_AUTHORIZATION_FAILED
        [described] = confluent_admin.describe_consumer_groups(["private-group"]).values()
        assert error_of(described) == KafkaError.GROUP_AUTHORIZATION_FAILED
        # Straight to the coordinator, as a client that knows it: DescribeGroups refuses too.
        [direct] = python_tool.describe_groups(["private-group"],
                                               group_coordinator_id=NODE_ID).values()
        assert direct["error"].startswith("[Error 30] GroupAuthorizationFailedError")
        assert (direct["group_state"], direct["members"]) == ("", [])
        assert "private-group" not in listed_groups(broker, "bob")
    finally:
        python_tool.close()

    assert committed(broker, "private-group") == {("private-offsets", 0): 7}


def test_a_group_shows_the_offsets_of_only_the_topics_the_principal_may_describe(broker):
    create_topics(broker, "shown-offsets", "hidden-offsets")
    commit_as_admin(broker, "shared-group", {"shown-offsets": 3, "hidden-offsets": 4})
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.GROUP, "shared-group")
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "shown-offsets")
    bob = admin(broker, "bob")

    [every] = settle(bob.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("shared-group")])).values()
    [named] = settle(bob.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "shared-group", [TopicPartition("shown-offsets", 0),
                         TopicPartition("hidden-offsets", 0)])])).values()

    assert [(tp.topic, tp.offset) for tp in every.topic_partitions] == [("shown-offsets", 3)]
    assert {tp.topic: (tp.offset, tp.error and tp.error.code())
            for tp in named.topic_partitions} == {
        "shown-offsets": (3, None),
        "hidden-offsets": (confluent_kafka.OFFSET_INVALID,
                           KafkaError.TOPIC_AUTHORIZATION_FAILED)}


def test_committing_offsets_needs_read_on_each_topic_and_commits_only_those_it_may(broker):
    create_topics(broker, "commit-readable", "commit-secret")
    grant(broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "commit-group")
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "commit-readable")
    consumer = confluent_kafka.Consumer(librdkafka(broker, "alice",
                                                   **{"group.id": "commit-group"}))
    try:
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=[TopicPartition("commit-readable", 0, 3),
                                     TopicPartition("commit-secret", 0, 5),
                                     TopicPartition("commit-nowhere", 0, 1)],
                            asynchronous=False)
        seen = consumer.committed([TopicPartition("commit-secret", 0),
                                   TopicPartition("commit-nowhere", 0)],
                                  timeout=TIMEOUT_SECONDS)
    finally:
        consumer.close()

    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A topic that does not exist is refused like one that does: nothing tells them apart.
    assert [tp.error.code() for tp in seen] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert committed(broker, "commit-group") == {("commit-readable", 0): 3}


def test_deleting_a_group_or_its_offsets_needs_delete_on_the_group_and_read_on_the_topic(
        broker):
    create_topics(broker, "deletable-offsets", "kept-offsets")
    commit_as_admin(broker, "deletable-group", {"deletable-offsets": 2, "kept-offsets": 5})
    grant(broker, "User:bob", AclOperation.READ, ResourceType.GROUP, "deletable-group")
    grant(broker, "User:bob", AclOperation.READ, ResourceType.TOPIC, "deletable-offsets")
    bob, python_tool = admin(broker, "bob"), python_admin(broker, "bob")
    deletable = kafka.TopicPartition("deletable-offsets", 0)
    kept = kafka.TopicPartition("kept-offsets", 0)
    try:
        # READ lets bob use the group, not delete it nor its offsets.
        [deleted] = bob.delete_consumer_groups(["deletable-group"]).values()
        assert error_of(deleted) == KafkaError.GROUP_AUTHORIZATION_FAILED
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            python_tool.delete_group_offsets("deletable-group", [deletable],
                                             group_coordinator_id=NODE_ID)
        assert committed(broker, "deletable-group") == {("deletable-offsets", 0): 2,
                                                        ("kept-offsets", 0): 5}

        grant(broker, "User:bob", AclOperation.DELETE, ResourceType.GROUP, "deletable-group")
        assert python_tool.delete_group_offsets("deletable-group", [deletable, kept]) == {
            deletable: kafka.errors.NoError,
            kept: kafka.errors.TopicAuthorizationFailedError}
        assert committed(broker, "deletable-group") == {("kept-offsets", 0): 5}
        settle(bob.delete_consumer_groups(["deletable-group"]))
    finally:
        python_tool.close()

    assert "deletable-group" not in listed_groups(broker, "admin")


def test_list_groups_shows_a_principal_only_the_groups_it_may_describe(broker):
    create_topics(broker, "listed-offsets")
    for group in ("listed-visible", "listed-hidden"):
        commit_as_admin(broker, group, {"listed-offsets": 1})
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.GROUP, "listed-visible")

    bobs, admins = listed_groups(broker, "bob"), listed_groups(broker, "admin")

    assert "listed-visible" in bobs and "listed-hidden" not in bobs
    assert {"listed-visible", "listed-hidden"} <= admins


# --- consuming in a group with the ACLs granted ------------------------------------------------


def confluent_consume_and_commit(broker: EmbeddedBroker, group: str, topic: str,
                                 count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(librdkafka(broker, "alice", **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        messages = consume(consumer, count)
        consumer.commit(asynchronous=False)
        return [message.value() for message in messages]
    finally:
        consumer.close()


def kafka_python_consume_and_commit(broker: EmbeddedBroker, group: str, topic: str,
                                    count: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False, **python_client(broker, "alice"))
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [record.value for record in records]
        consumer.commit()
        return values
    finally:
        consumer.close()


def aiokafka_consume_and_commit(broker: EmbeddedBroker, group: str, topic: str,
                                count: int) -> list[bytes]:
    async def run() -> list[bytes]:
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                             enable_auto_commit=False,
                                             **python_client(broker, "alice"))
        try:
            await consumer.start()
            values = [(await asyncio.wait_for(consumer.getone(), TIMEOUT_SECONDS)).value
                      for _ in range(count)]
            await consumer.commit()
            return values
        finally:
            await consumer.stop()

    return asyncio.run(run())


CONSUMERS = {"confluent-kafka": confluent_consume_and_commit,
             "kafka-python": kafka_python_consume_and_commit,
             "aiokafka": aiokafka_consume_and_commit}


@pytest.mark.parametrize("library", CONSUMERS)
def test_with_read_on_the_group_and_the_topic_a_consumer_group_consumes_and_commits(
        broker, library):
    topic, group = f"granted-topic-{library}", f"granted-group-{library}"
    create_topics(broker, topic)
    produce(broker, topic, b"a", b"b", b"c")
    # Prefixed ACLs (KIP-290), as an application's ACLs usually are.
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "granted-topic-",
          pattern_type=PREFIXED)
    grant(broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "granted-group-",
          pattern_type=PREFIXED)

    assert CONSUMERS[library](broker, group, topic, 3) == [b"a", b"b", b"c"]
    assert committed(broker, group) == {(topic, 0): 3}


# --- transactions ---------------------------------------------------------------------------


@pytest.mark.parametrize("transactional_id_acl", [None, AclOperation.DESCRIBE],
                         ids=["no-acl", "describe-only"])
def test_a_transactional_producer_without_write_on_its_id_is_refused_and_writes_nothing(
        broker, transactional_id_acl):
    # No ACL: FindCoordinator refuses the id; DESCRIBE only: InitProducerId refuses it.
    transactional_id = f"refused-tx-{transactional_id_acl}"
    if transactional_id_acl is not None:
        grant(broker, "User:bob", transactional_id_acl, ResourceType.TRANSACTIONAL_ID,
              transactional_id)
    producer = confluent_kafka.Producer(librdkafka(broker, "bob", **{
        "transactional.id": transactional_id}))

    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT_SECONDS)

    error = refused.value.args[0]
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert error.fatal()
    python_tool = python_admin(broker, "admin")
    try:
        with pytest.raises(kafka.errors.TransactionalIdNotFoundError):
            python_tool.describe_transactions([transactional_id])
    finally:
        python_tool.close()


def test_an_idempotent_producer_without_write_on_any_topic_is_refused(broker):
    # InitProducerId without a transactional id needs IDEMPOTENT_WRITE on the cluster or
    # WRITE on some topic (KIP-679); bob has neither.
    producer = confluent_kafka.Producer(librdkafka(broker, "bob", **{
        "enable.idempotence": True}))

    with pytest.raises(KafkaException) as refused:  # the producer's fatal error, when polled
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            producer.poll(0.1)

    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert refused.value.args[0].fatal()


def test_with_the_acls_granted_a_transaction_consumes_produces_and_commits_offsets(broker):
    create_topics(broker, "e2e-in", "e2e-out")
    produce(broker, "e2e-in", b"1", b"2", b"3")
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "e2e-tx-",
          pattern_type=PREFIXED)
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "e2e-",
          pattern_type=PREFIXED)
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "e2e-out")
    grant(broker, "User:alice", AclOperation.READ, ResourceType.GROUP, "e2e-group-",
          pattern_type=PREFIXED)
    consumer = confluent_kafka.Consumer(librdkafka(broker, "alice", **{
        "group.id": "e2e-group-processor", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed"}))
    producer = confluent_kafka.Producer(librdkafka(broker, "alice", **{
        "transactional.id": "e2e-tx-processor"}))
    try:
        consumer.subscribe(["e2e-in"])
        consumed = consume(consumer, 3)
        producer.init_transactions(TIMEOUT_SECONDS)
        producer.begin_transaction()
        for message in consumed:
            producer.produce("e2e-out", message.value() * 2)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(),
                                             TIMEOUT_SECONDS)
        producer.commit_transaction(TIMEOUT_SECONDS)
    finally:
        consumer.close()

    assert read_committed(broker, "e2e-out", 3) == [b"11", b"22", b"33"]
    assert committed(broker, "e2e-group-processor") == {("e2e-in", 0): 3}


def test_a_transaction_writing_to_a_topic_without_write_on_it_cannot_commit(broker):
    create_topics(broker, "partial-writable", "partial-readonly")
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "partial-tx")
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "partial-writable")
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, "partial-readonly")
    producer = confluent_kafka.Producer(librdkafka(broker, "alice", **{
        "transactional.id": "partial-tx"}))
    producer.init_transactions(TIMEOUT_SECONDS)
    producer.begin_transaction()
    producer.produce("partial-writable", b"half")
    producer.produce("partial-readonly", b"other half")
    producer.flush(TIMEOUT_SECONDS)

    # AddPartitionsToTxn: TOPIC_AUTHORIZATION_FAILED for the one, OPERATION_NOT_ATTEMPTED for
    # the other; neither joins the transaction, so nothing can be written.
    with pytest.raises(KafkaException) as refused:
        producer.commit_transaction(TIMEOUT_SECONDS)

    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert refused.value.args[0].txn_requires_abort()
    assert log_end_offset(broker, "partial-writable") == 0


def test_a_principal_sees_only_the_transactions_and_partitions_it_may_describe(broker):
    create_topics(broker, "described-shown", "described-hidden")
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
          "described-tx-", pattern_type=PREFIXED)
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "described-",
          pattern_type=PREFIXED)
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
          "described-tx-shown")
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "described-shown")
    producers = {}
    python_tool = python_admin(broker, "bob")
    try:
        for transactional_id in ("described-tx-shown", "described-tx-hidden"):
            producer = producers[transactional_id] = confluent_kafka.Producer(librdkafka(
                broker, "alice", **{"transactional.id": transactional_id}))
            producer.init_transactions(TIMEOUT_SECONDS)
            producer.begin_transaction()
            for topic in ("described-shown", "described-hidden"):
                producer.produce(topic, b"open")
            assert producer.flush(TIMEOUT_SECONDS) == 0

        described = python_tool.describe_transactions(["described-tx-shown"])
        listed = {listing.transactional_id
                  for listings in python_tool.list_transactions().values()
                  for listing in listings}
        with pytest.raises(kafka.errors.TransactionalIdAuthorizationFailedError):
            python_tool.describe_transactions(["described-tx-hidden"])
    finally:
        python_tool.close()
        for producer in producers.values():
            producer.abort_transaction(TIMEOUT_SECONDS)

    assert described["described-tx-shown"].topic_partitions == {
        kafka.TopicPartition("described-shown", 0)}
    assert "described-tx-shown" in listed and "described-tx-hidden" not in listed


# --- request by request ----------------------------------------------------------------------


def as_anonymous(broker: EmbeddedBroker, api_key: ApiKey, version: int, **body):
    """The broker's answer to one request, as a client sends it at a moment a test cannot
    easily arrange (a member whose ACL is revoked) or as no client library sends it, from a
    client the broker knows as ANONYMOUS (``User:ANONYMOUS``)."""
    request = build(request_class(api_key, version), **body)

    async def handle():
        outcome = broker.handle(api_key, version, request)
        return await outcome if inspect.isawaitable(outcome) else outcome

    return broker.call(handle())


def _top_level(response) -> list[ErrorCode]:
    return [response.error_code]


def _by_partition(response) -> list[ErrorCode]:
    return [p.error_code for topic in response.topics for p in topic.partitions]


def _added(response) -> list[ErrorCode]:
    return [p.partition_error_code for topic in response.results_by_topic_v3_and_below
            for p in topic.results_by_partition]


ONE_PARTITION = [{"name": "anonymous-topic", "partitions": [{
    "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
    "committed_metadata": None}]}]
PRODUCER = {"transactional_id": "anonymous-tx", "producer_id": 1, "producer_epoch": 0}
GROUP = "anonymous-group"
GAF, TIAF = ErrorCode.group_authorization_failed, ErrorCode.transactional_id_authorization_failed

# Every group and transaction request, from a principal no ACL names: refused, as Kafka's
# KafkaApis refuses it, before the coordinator sees it.
WITHOUT_ACLS = [
    pytest.param(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP, "g2"]},
                 lambda r: [c.error_code for c in r.coordinators], [GAF, GAF],
                 id="FindCoordinator-groups"),
    pytest.param(ApiKey.FIND_COORDINATOR, 3, {"key_type": 1, "key": "anonymous-tx"},
                 _top_level, [TIAF], id="FindCoordinator-transactional-id"),
    pytest.param(ApiKey.JOIN_GROUP, 9, {
        "group_id": GROUP, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None},
        _top_level, [GAF], id="JoinGroup"),
    pytest.param(ApiKey.SYNC_GROUP, 5, {
        "group_id": GROUP, "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
        _top_level, [GAF], id="SyncGroup"),
    pytest.param(ApiKey.HEARTBEAT, 4, {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                                       "group_instance_id": None},
                 _top_level, [GAF], id="Heartbeat"),
    pytest.param(ApiKey.LEAVE_GROUP, 5, {"group_id": GROUP, "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]},
        _top_level, [GAF], id="LeaveGroup"),
    pytest.param(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": ONE_PARTITION}, _by_partition, [GAF],
        id="OffsetCommit"),
    # Before v2 there is no group-level error: it is on every partition asked for.
    pytest.param(ApiKey.OFFSET_FETCH, 1, {"group_id": GROUP, "topics": [
        {"name": "anonymous-topic", "partition_indexes": [0, 1]}]},
        _by_partition, [GAF, GAF], id="OffsetFetch-v1"),
    pytest.param(ApiKey.OFFSET_FETCH, 8, {"require_stable": False, "groups": [
        {"group_id": GROUP, "topics": None}]},
        lambda r: [g.error_code for g in r.groups], [GAF], id="OffsetFetch-v8"),
    pytest.param(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP],
                                             "include_authorized_operations": True},
                 lambda r: [g.error_code for g in r.groups], [GAF], id="DescribeGroups"),
    pytest.param(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP, GROUP]},
                 lambda r: [g.error_code for g in r.results], [GAF], id="DeleteGroups"),
    pytest.param(ApiKey.OFFSET_DELETE, 0, {"group_id": GROUP, "topics": [
        {"name": "anonymous-topic", "partitions": [{"partition_index": 0}]}]},
        _top_level, [GAF], id="OffsetDelete"),
    pytest.param(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": "anonymous-tx", "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1}, _top_level, [TIAF], id="InitProducerId"),
    pytest.param(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "anonymous-tx", "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "anonymous-topic", "partitions": [0, 1]}]},
        _added, [TIAF, TIAF], id="AddPartitionsToTxn"),
    pytest.param(ApiKey.ADD_OFFSETS_TO_TXN, 3, PRODUCER | {"group_id": GROUP},
                 _top_level, [TIAF], id="AddOffsetsToTxn"),
    pytest.param(ApiKey.END_TXN, 3, PRODUCER | {"committed": True},
                 _top_level, [TIAF], id="EndTxn"),
    pytest.param(ApiKey.TXN_OFFSET_COMMIT, 3, PRODUCER | {
        "group_id": GROUP, "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": ONE_PARTITION}, _by_partition, [TIAF], id="TxnOffsetCommit"),
]


@pytest.mark.parametrize(("api_key", "version", "body", "errors", "expected"), WITHOUT_ACLS)
def test_a_principal_without_acls_is_refused_every_group_and_transaction_request(
        broker, api_key, version, body, errors, expected):
    assert errors(as_anonymous(broker, api_key, version, **body)) == expected


def test_a_producer_brings_a_groups_offsets_into_its_transaction_only_with_read_on_it(broker):
    grant(broker, "User:ANONYMOUS", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
          "anonymous-producer")
    producer = {"transactional_id": "anonymous-producer", "producer_id": 1,
                "producer_epoch": 0, "group_id": "not-its-group"}

    added = as_anonymous(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, **producer)
    committed_offsets = as_anonymous(broker, ApiKey.TXN_OFFSET_COMMIT, 3, **producer,
                                     generation_id=-1, member_id="", group_instance_id=None,
                                     topics=ONE_PARTITION)

    assert added.error_code == GAF
    assert _by_partition(committed_offsets) == [GAF]


def test_a_producer_adds_no_partition_unless_it_may_write_every_topic_internal_ones_never(
        broker):
    create_topics(broker, "anonymous-writable")
    grant(broker, "User:ANONYMOUS", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
          "anonymous-adder")
    grant(broker, "User:ANONYMOUS", AclOperation.WRITE, ResourceType.TOPIC,
          "anonymous-writable")
    grant(broker, "User:ANONYMOUS", AclOperation.ALL, ResourceType.TOPIC, "__consumer_offsets")

    response = as_anonymous(
        broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="anonymous-adder",
        v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=[
            {"name": "anonymous-writable", "partitions": [0]},
            {"name": "__consumer_offsets", "partitions": [0]}])

    assert {topic.name: [p.partition_error_code for p in topic.results_by_partition]
            for topic in response.results_by_topic_v3_and_below} == {
        "anonymous-writable": [ErrorCode.operation_not_attempted],
        "__consumer_offsets": [ErrorCode.topic_authorization_failed]}


def test_transaction_markers_and_verifications_are_for_brokers_only(broker):
    create_topics(broker, "marked-topic")
    produce(broker, "marked-topic", b"before")

    markers = as_anonymous(broker, ApiKey.WRITE_TXN_MARKERS, 1, markers=[{
        "producer_id": 1, "producer_epoch": 0, "transaction_result": False,
        "coordinator_epoch": 0,
        "topics": [{"name": "marked-topic", "partition_indexes": [0]}]}])
    verified = as_anonymous(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 4, transactions=[{
        "transactional_id": "any-tx", "producer_id": 1, "producer_epoch": 0,
        "verify_only": True, "topics": [{"name": "marked-topic", "partitions": [0]}]}])

    [marker] = markers.markers
    [topic] = marker.topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.cluster_authorization_failed]
    assert verified.error_code == ErrorCode.cluster_authorization_failed
    assert verified.results_by_transaction == ()
    assert log_end_offset(broker, "marked-topic") == 1  # no marker after the record


# --- SCRAM credentials ----------------------------------------------------------------------


def test_describing_and_altering_scram_credentials_needs_describe_and_alter_on_the_cluster(
        broker):
    # kafka-python's admin client: librdkafka (confluent-kafka) crashes on any
    # DescribeUserScramCredentials answer with an error, Kafka's included.
    carol = kafka.admin.UserScramCredentialUpsertion("scram-carol", "SCRAM-SHA-256",
                                                     "carol-secret")
    tools = {user: python_admin(broker, user) for user in ("admin", "alice", "bob")}
    try:
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            tools["bob"].describe_user_scram_credentials()
        assert tools["bob"].alter_user_scram_credentials([carol]) == {
            "scram-carol": "Cluster authorization failed."}

        # confluent-kafka's BROKER is Kafka's CLUSTER resource type.
        grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.BROKER, CLUSTER_NAME)
        assert "scram-carol" not in tools["alice"].describe_user_scram_credentials()
        assert tools["alice"].alter_user_scram_credentials([carol]) == {
            "scram-carol": "Cluster authorization failed."}

        grant(broker, "User:alice", AclOperation.ALTER, ResourceType.BROKER, CLUSTER_NAME)
        assert tools["alice"].alter_user_scram_credentials([carol]) == {"scram-carol": None}
        assert tools["admin"].describe_user_scram_credentials(["scram-carol"]) == {
            "scram-carol": {"error": None, "credential_infos": [
                {"mechanism": kafka.admin.ScramMechanism.SCRAM_SHA_256,
                 "iterations": 4096}]}}
    finally:
        for tool in tools.values():
            tool.close()


# --- the super user ---------------------------------------------------------------------------


def test_the_super_user_may_do_everything_without_an_acl(broker):
    create_topics(broker, "super-topic")
    python_tool = python_admin(broker, "admin")
    producer = confluent_kafka.Producer(librdkafka(broker, "admin", **{
        "transactional.id": "super-tx"}))
    producer.init_transactions(TIMEOUT_SECONDS)
    producer.begin_transaction()
    producer.produce("super-topic", b"x")
    assert producer.flush(TIMEOUT_SECONDS) == 0
    try:
        described = python_tool.describe_transactions(["super-tx"])
        credentials = python_tool.describe_user_scram_credentials()
    finally:
        python_tool.close()
    producer.commit_transaction(TIMEOUT_SECONDS)
    consumer = confluent_kafka.Consumer(librdkafka(broker, "admin", **{
        "group.id": "super-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    try:
        consumer.subscribe(["super-topic"])
        assert [m.value() for m in consume(consumer, 1)] == [b"x"]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    assert described["super-tx"].state is kafka.admin.TransactionState.ONGOING
    assert described["super-tx"].topic_partitions == {kafka.TopicPartition("super-topic", 0)}
    assert isinstance(credentials, dict)
    assert committed(broker, "super-group")[("super-topic", 0)] >= 1
    assert "super-group" in listed_groups(broker, "admin")

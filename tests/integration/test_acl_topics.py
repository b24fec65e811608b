"""Topics, their configs and the cluster behind Kafka's ACLs, as clients meet them.

A principal is refused what it holds no ACL for, with Kafka's error, and learns nothing of a
topic it may not DESCRIBE: a refused topic answers the same whether or not it exists, and a
listing leaves it out. What is refused is not done, as the super user then checks. An ALLOW,
LITERAL or PREFIXED, lets the same operation through; a DENY wins over any ALLOW; the super
user needs no ACL at all.

One secured broker serves the whole module (``secured.secured_broker``: ``admin`` is the
super user, ``alice`` and ``bob`` hold only what a test grants them), each test on topics of
its own. The corners no client reaches on purpose (a replica's fetch, a transactional write
without its transactional id's ACL, the configs CreateTopics returns) are raw requests of a
client authenticated as a user would be.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import aiokafka.errors
import confluent_kafka
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from conftest import CLIENTS, TIMEOUT_SECONDS, Client
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode
from raw_client import CONSUMER_REPLICA_ID, RawClient
from secured import USERS, admin, grant, librdkafka, python_client, secured_broker, security

from odradek.protocol.api import ApiKey
from odradek.protocol.records import Record, build_batch
from odradek.security.acl import CLUSTER_NAME
from odradek.testing.embedded import EmbeddedBroker

RECORDS = [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(3)]
# The group conftest's confluent-kafka consumer is in (it only assigns): any consumer needs
# READ on its group, which the module grants alice and bob once.
CONSUMER_GROUP = "odradek-integration"
# Bounds a consumer that is refused: it raises its error well before.
REFUSED_CONSUMER_TIMEOUT_SECONDS = 5.0
# The client libraries every user-facing rule is checked with (kcat is librdkafka again).
CLIENT_LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
# The operations on a topic and on the cluster an ACL can name (KIP-430's answers).
TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                      AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
BROKER_ID = "0"
CREATE_TIMEOUT_MS = int(TIMEOUT_SECONDS * 1000)  # a raw CreateTopics' wait for its topic


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    secured = secured_broker(tmp_path_factory.mktemp("acl-topics")).start()
    try:
        for user in ("alice", "bob"):
            grant(secured, f"User:{user}", AclOperation.READ, ResourceType.GROUP, CONSUMER_GROUP)
        yield secured
    finally:
        # Clients a refused call's traceback kept alive are collected now, before the broker
        # goes, rather than left retrying it.
        gc.collect()
        secured.stop()


# --- What the super user sees --------------------------------------------------------------


def create_topics(broker: EmbeddedBroker, *names: str, partitions: int = 1) -> None:
    superuser = admin(broker)
    done(superuser.create_topics([NewTopic(name, partitions, 1) for name in names],
                                 request_timeout=TIMEOUT_SECONDS))


def topic_names(broker: EmbeddedBroker) -> set[str]:
    return set(admin(broker).list_topics(timeout=TIMEOUT_SECONDS).topics)


def partition_count(broker: EmbeddedBroker, topic: str) -> int:
    return len(admin(broker).list_topics(topic, timeout=TIMEOUT_SECONDS)
               .topics[topic].partitions)


def high_watermark(broker: EmbeddedBroker, topic: str, partition: int = 0) -> int:
    """How many records the partition holds, as the super user reads its offsets."""
    consumer = confluent_kafka.Consumer(librdkafka(broker, "admin", **{"group.id": "admin"}))
    try:
        _, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS)
    finally:
        consumer.close()
    return high


def topic_config(broker: EmbeddedBroker, topic: str, key: str) -> str:
    return described_config(broker, ConfigResource(ResourceType.TOPIC, topic), key)


def broker_config(broker: EmbeddedBroker, key: str) -> str:
    return described_config(broker, ConfigResource(ResourceType.BROKER, BROKER_ID), key)


def described_config(broker: EmbeddedBroker, resource: ConfigResource, key: str) -> str:
    superuser = admin(broker)
    return done(superuser.describe_configs([resource]))[resource][key].value


# --- Clients as a user ---------------------------------------------------------------------


def producer_settings(client: Client, user: str) -> dict:
    """``user``'s producer settings for ``client``. kafka-python's producer is idempotent by
    default: without idempotence what refuses it is the Produce request, not the
    InitProducerId an idempotent producer sends first."""
    settings = security(client.name, user)
    return settings | {"enable_idempotence": False} if client.name == "kafka-python" else settings


def is_topic_authorization_failed(error: BaseException) -> bool:
    """Whether a client's error is Kafka's TOPIC_AUTHORIZATION_FAILED, in its own type."""
    if isinstance(error, KafkaException):
        return error.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    return isinstance(error, (kafka.errors.TopicAuthorizationFailedError,
                              aiokafka.errors.TopicAuthorizationFailedError))


def done(futures: dict) -> dict:
    return {key: future.result(timeout=TIMEOUT_SECONDS) for key, future in futures.items()}


def failure(futures: dict) -> int:
    """The error code of the one future of an admin call, which must fail."""
    [future] = futures.values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_SECONDS)
    return raised.value.args[0].code()


@contextmanager
def raw_client(broker: EmbeddedBroker, user: str) -> Iterator[RawClient]:
    with RawClient(broker.port) as raw:
        raw.authenticate_plain(user, USERS[user])
        yield raw


def produce_as_admin(broker: EmbeddedBroker, topic: str) -> None:
    CLIENTS["confluent-kafka"].produce(broker.bootstrap_servers, topic, RECORDS,
                                       security=security("confluent-kafka", "admin"))


def kafka_admin(broker: EmbeddedBroker, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(**python_client(broker, user))


# --- Produce -------------------------------------------------------------------------------


@pytest.mark.clients(*CLIENT_LIBRARIES)
@pytest.mark.parametrize("acl", [None, AclOperation.DESCRIBE], ids=["no-acl", "describe-only"])
def test_a_principal_that_may_not_write_to_a_topic_is_refused_and_nothing_is_written(
        broker, client, acl):
    # Without DESCRIBE the client learns it from Metadata and sends nothing; with DESCRIBE
    # alone it is the Produce request that is refused.
    topic = f"unwritable-{client.name}-{'described' if acl else 'unseen'}"
    create_topics(broker, topic)
    if acl is not None:
        grant(broker, "User:alice", acl, ResourceType.TOPIC, topic)

    with pytest.raises(Exception) as refused:
        client.produce(broker.bootstrap_servers, topic, RECORDS,
                       security=producer_settings(client, "alice"))

    assert is_topic_authorization_failed(refused.value), refused.value
    assert high_watermark(broker, topic) == 0


def test_a_transactional_write_needs_write_on_its_transactional_id(broker):
    topic = "transactional-writes"
    create_topics(broker, topic)
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic)
    batch = build_batch([Record(0, 1_700_000_000_000, None, b"in a transaction")],
                        producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)

    with raw_client(broker, "alice") as raw:
        refused = [raw.produce(topic, batch, transactional_id=transactional_id)
                   for transactional_id in ("alice-transactions", None)]
        grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
              "alice-transactions")
        authorized = raw.produce(topic, batch, transactional_id="alice-transactions")

    assert [(r.error_code, r.error_message) for r in refused] == [
        (ErrorCode.transactional_id_authorization_failed,
         "Transactional Id authorization failed.")] * 2
    # Authorized, the write is the transaction coordinator's to verify (no transaction is
    # ongoing, so it is refused too, for that reason).
    assert authorized.error_code != ErrorCode.transactional_id_authorization_failed
    assert high_watermark(broker, topic) == 0


# --- Consume -------------------------------------------------------------------------------


@pytest.mark.clients(*CLIENT_LIBRARIES)
def test_a_principal_that_may_describe_but_not_read_a_topic_cannot_consume_it(broker, client):
    topic = f"unreadable-{client.name}"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    with pytest.raises(Exception) as refused:
        client.consume(broker.bootstrap_servers, topic, len(RECORDS),
                       security=security(client.name, "alice"),
                       timeout=REFUSED_CONSUMER_TIMEOUT_SECONDS)

    assert is_topic_authorization_failed(refused.value), refused.value


def test_a_principal_without_acls_that_subscribes_to_a_topic_is_refused(broker):
    topic = "unreadable-unseen"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    consumer = confluent_kafka.Consumer(librdkafka(broker, "alice", **{
        "group.id": CONSUMER_GROUP, "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([topic])
        message = consumer.poll(REFUSED_CONSUMER_TIMEOUT_SECONDS)
    finally:
        consumer.close()

    assert message is not None and message.error() is not None, "nothing reported"
    assert message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_refused_fetch_or_offset_lookup_reveals_nothing_of_the_topic(broker):
    topic = "secret-records"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)

    with raw_client(broker, "alice") as raw:
        fetched = {name: raw.fetch(name, 0) for name in (topic, "no-such-records")}
        listed = {name: raw.list_offset(name, -1) for name in (topic, "no-such-records")}

    # The same answer for a topic with records as for one that does not exist.
    assert fetched[topic] == fetched["no-such-records"]
    assert (fetched[topic].error_code, fetched[topic].high_watermark,
            fetched[topic].records) == (ErrorCode.topic_authorization_failed, -1, b"")
    assert listed[topic] == listed["no-such-records"]
    assert (listed[topic].error_code, listed[topic].offset) == (
        ErrorCode.topic_authorization_failed, -1)


def test_listing_offsets_needs_only_describe(broker):
    topic = "described-offsets"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    partition = confluent_kafka.TopicPartition(topic, 0)

    alice = admin(broker, "alice")
    [latest] = done(alice.list_offsets({partition: OffsetSpec.latest()},
                                       request_timeout=TIMEOUT_SECONDS)).values()

    assert latest.offset == len(RECORDS)


def test_a_replica_fetch_needs_cluster_action_on_the_cluster(broker):
    topic = "replicated-records"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)

    with raw_client(broker, "alice") as raw:
        as_consumer = raw.fetch(topic, 0)
        as_replica = raw.fetch(topic, 0, replica_id=1)

    assert as_consumer.error_code == ErrorCode.none and as_consumer.records
    # READ on the topic is not enough to pose as a follower: Kafka answers the topic's error.
    assert (as_replica.error_code, as_replica.records) == (
        ErrorCode.topic_authorization_failed, b"")


def test_epoch_end_offsets_need_describe_on_the_topic_or_cluster_action(broker):
    topic = "epoch-ends"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    def end_of_epoch_zero(user: str):
        with raw_client(broker, user) as raw:
            response = raw.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4,
                                   replica_id=CONSUMER_REPLICA_ID, topics=[
                {"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}])
        [answered] = response.topics
        [partition] = answered.partitions
        return partition.error_code, partition.end_offset

    assert end_of_epoch_zero("alice") == (ErrorCode.topic_authorization_failed, -1)
    assert end_of_epoch_zero("bob") == (ErrorCode.none, len(RECORDS))
    assert end_of_epoch_zero("admin") == (ErrorCode.none, len(RECORDS))


# --- Describe ------------------------------------------------------------------------------


def test_listing_topics_leaves_out_those_a_principal_may_not_describe(broker):
    create_topics(broker, "listed-visible", "listed-unseen")
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "listed-visible")

    confluent = set(admin(broker, "alice").list_topics(timeout=TIMEOUT_SECONDS).topics)
    python = kafka_admin(broker, "alice")
    try:
        kafka_python = set(python.list_topics())
    finally:
        python.close()

    for listed in (confluent, kafka_python):
        assert "listed-visible" in listed
        assert "listed-unseen" not in listed
    assert {"listed-visible", "listed-unseen"} <= topic_names(broker)


def test_naming_a_topic_that_may_not_be_described_answers_the_same_whether_it_exists(broker):
    create_topics(broker, "named-unseen", "named-visible")
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "named-visible")

    alice = admin(broker, "alice")
    errors = {name: alice.list_topics(name, timeout=TIMEOUT_SECONDS).topics[name].error.code()
              for name in ("named-unseen", "named-missing")}
    python = kafka_admin(broker, "alice")
    try:
        described = python.describe_topic_partitions(
            ["named-unseen", "named-missing", "named-visible"])["topics"]
    finally:
        python.close()

    assert errors == dict.fromkeys(("named-unseen", "named-missing"),
                                   KafkaError.TOPIC_AUTHORIZATION_FAILED)
    by_name = {topic["name"]: topic for topic in described}
    visible = by_name["named-visible"]
    assert (visible["error_code"], [p["partition_index"] for p in visible["partitions"]],
            visible["topic_authorized_operations"]) == (ErrorCode.none, [0],
                                                        1 << AclOperation.DESCRIBE.value)
    unseen, missing = ({key: value for key, value in by_name[name].items() if key != "name"}
                       for name in ("named-unseen", "named-missing"))
    assert unseen == missing
    assert (unseen["error_code"], unseen["partitions"]) == (
        ErrorCode.topic_authorization_failed, [])
    assert "named-missing" not in topic_names(broker)


def test_a_principal_is_told_its_authorized_operations_when_it_asks(broker):
    topic = "operations-told"
    create_topics(broker, topic)
    grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)

    def topic_operations(user: str) -> set:
        client = admin(broker, user)
        [future] = client.describe_topics(
            TopicCollection([topic]), include_authorized_operations=True).values()
        return set(future.result(timeout=TIMEOUT_SECONDS).authorized_operations)

    def cluster_operations(user: str) -> set:
        client = admin(broker, user)
        return set(client.describe_cluster(include_authorized_operations=True)
                   .result(timeout=TIMEOUT_SECONDS).authorized_operations)

    # READ implies DESCRIBE; the super user may do everything a topic supports.
    assert topic_operations("alice") == {AclOperation.READ, AclOperation.DESCRIBE}
    assert topic_operations("admin") == TOPIC_OPERATIONS
    assert cluster_operations("admin") == CLUSTER_OPERATIONS
    # Without DESCRIBE on the cluster, none of its operations is told (0, not "not asked").
    with raw_client(broker, "alice") as raw:
        described = raw.request(ApiKey.DESCRIBE_CLUSTER, 1, endpoint_type=1,
                                include_cluster_authorized_operations=True)
    assert described.cluster_authorized_operations == 0


# --- Create and delete ---------------------------------------------------------------------


def test_auto_creating_a_topic_needs_create_on_the_cluster_or_on_the_topic(broker):
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "auto-",
          pattern_type=ResourcePatternType.PREFIXED)
    grant(broker, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "auto-allowed")
    confluent = CLIENTS["confluent-kafka"]

    with pytest.raises(KafkaException) as refused:
        confluent.produce(broker.bootstrap_servers, "auto-refused", RECORDS,
                          security=security(confluent.name, "alice"))
    confluent.produce(broker.bootstrap_servers, "auto-allowed", RECORDS,
                      security=security(confluent.name, "alice"))

    assert is_topic_authorization_failed(refused.value), refused.value
    assert "auto-refused" not in topic_names(broker)
    assert high_watermark(broker, "auto-allowed") == len(RECORDS)


def test_creating_a_topic_needs_create_on_the_cluster_or_on_the_topic(broker):
    alice = admin(broker, "alice")
    refused = failure(alice.create_topics([NewTopic("created-refused", 1, 1)],
                                          request_timeout=TIMEOUT_SECONDS))
    grant(broker, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "created-literal")
    grant(broker, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "created-by-alice-",
          pattern_type=ResourcePatternType.PREFIXED)
    grant(broker, "User:bob", AclOperation.CREATE, ResourceType.BROKER, CLUSTER_NAME)

    done(alice.create_topics([NewTopic("created-literal", 1, 1),
                              NewTopic("created-by-alice-1", 1, 1)],
                             request_timeout=TIMEOUT_SECONDS))
    bob = admin(broker, "bob")
    done(bob.create_topics([NewTopic("created-by-bob", 1, 1)], request_timeout=TIMEOUT_SECONDS))

    assert refused == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "created-refused" not in topic_names(broker)
    assert {"created-literal", "created-by-alice-1", "created-by-bob"} <= topic_names(broker)


def test_a_created_topics_configs_are_returned_only_with_describe_configs(broker):
    grant(broker, "User:alice", AclOperation.CREATE, ResourceType.TOPIC, "configured-",
          pattern_type=ResourcePatternType.PREFIXED)
    grant(broker, "User:alice", AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
          "configured-shown")

    with raw_client(broker, "alice") as raw:
        hidden, shown = (raw.request(ApiKey.CREATE_TOPICS, 7, timeout=CREATE_TIMEOUT_MS,
                                     validate_only=False, topics=[{
                                         "name": name, "num_partitions": 1,
                                         "replication_factor": 1, "assignments": [],
                                         "configs": []}]).topics[0]
                         for name in ("configured-hidden", "configured-shown"))

    assert (hidden.error_code, hidden.topic_config_error_code) == (
        ErrorCode.none, ErrorCode.topic_authorization_failed)
    assert (hidden.num_partitions, hidden.replication_factor, hidden.configs,
            hidden.topic_id) == (-1, -1, (), None)
    assert (shown.error_code, shown.topic_config_error_code) == (ErrorCode.none, ErrorCode.none)
    assert (shown.num_partitions, shown.replication_factor) == (1, 1)
    assert "retention.ms" in {config.name for config in shown.configs}
    assert {"configured-hidden", "configured-shown"} <= topic_names(broker)


def test_deleting_a_topic_needs_delete_on_it(broker):
    create_topics(broker, "deleted-refused", "deleted-allowed")
    alice = admin(broker, "alice")

    refused = {name: failure(alice.delete_topics([name], request_timeout=TIMEOUT_SECONDS))
               for name in ("deleted-refused", "deleted-missing")}
    grant(broker, "User:alice", AclOperation.DELETE, ResourceType.TOPIC, "deleted-allowed")
    done(alice.delete_topics(["deleted-allowed"], request_timeout=TIMEOUT_SECONDS))

    # A topic that does not exist is refused the same: its absence is not told.
    assert refused == dict.fromkeys(refused, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert "deleted-refused" in topic_names(broker)
    assert "deleted-allowed" not in topic_names(broker)


def test_adding_partitions_needs_alter_on_the_topic(broker):
    topic = "grown"
    create_topics(broker, topic)
    alice = admin(broker, "alice")

    refused = failure(alice.create_partitions([NewPartitions(topic, 2)],
                                              request_timeout=TIMEOUT_SECONDS))
    partitions_then = partition_count(broker, topic)
    grant(broker, "User:alice", AclOperation.ALTER, ResourceType.TOPIC, topic)
    done(alice.create_partitions([NewPartitions(topic, 2)], request_timeout=TIMEOUT_SECONDS))

    assert refused == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert partitions_then == 1
    assert partition_count(broker, topic) == 2


def test_deleting_records_needs_delete_on_the_topic(broker):
    topic = "trimmed"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    # DESCRIBE lets the client find the partition's leader, no more.
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    alice = admin(broker, "alice")
    below = [confluent_kafka.TopicPartition(topic, 0, 2)]

    refused = failure(alice.delete_records(below, request_timeout=TIMEOUT_SECONDS))
    grant(broker, "User:alice", AclOperation.DELETE, ResourceType.TOPIC, topic)
    [trimmed] = done(alice.delete_records(below, request_timeout=TIMEOUT_SECONDS)).values()

    assert refused == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert trimmed.low_watermark == 2


def test_describing_producers_needs_read_on_the_topic(broker):
    topic = "produced-by-whom"
    create_topics(broker, topic)
    produce_as_admin(broker, topic)
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    python = kafka_admin(broker, "alice")
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            python.describe_producers([kafka.TopicPartition(topic, 0)])
        grant(broker, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)
        described = python.describe_producers([kafka.TopicPartition(topic, 0)])
    finally:
        python.close()

    # The super user's producer is not idempotent: the leader keeps no state of it.
    assert described[kafka.TopicPartition(topic, 0)].active_producers == []


# --- Configs -------------------------------------------------------------------------------


def test_describing_configs_needs_describe_configs_on_the_topic_or_the_cluster(broker):
    topic = "described-configs"
    create_topics(broker, topic)
    topic_resource = ConfigResource(ResourceType.TOPIC, topic)
    broker_resource = ConfigResource(ResourceType.BROKER, BROKER_ID)

    alice, bob = admin(broker, "alice"), admin(broker, "bob")
    refused = {resource: failure(alice.describe_configs([resource]))
               for resource in (topic_resource, broker_resource)}
    grant(broker, "User:alice", AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
          "described-", pattern_type=ResourcePatternType.PREFIXED)
    grant(broker, "User:bob", AclOperation.DESCRIBE_CONFIGS, ResourceType.BROKER,
          CLUSTER_NAME)
    topic_configs = done(alice.describe_configs([topic_resource]))
    broker_configs = done(bob.describe_configs([broker_resource]))

    assert refused == {topic_resource: KafkaError.TOPIC_AUTHORIZATION_FAILED,
                       broker_resource: KafkaError.CLUSTER_AUTHORIZATION_FAILED}
    assert "retention.ms" in topic_configs[topic_resource]
    assert "log.retention.ms" in broker_configs[broker_resource]


def test_altering_configs_needs_alter_configs_on_the_topic_or_the_cluster(broker):
    topic = "altered-configs"
    create_topics(broker, topic)
    retention_then = topic_config(broker, topic, "retention.ms")
    broker_retention_then = broker_config(broker, "log.retention.ms")
    topic_change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    broker_change = ConfigResource(ResourceType.BROKER, BROKER_ID, incremental_configs=[
        ConfigEntry("log.retention.ms", "691200000",
                    incremental_operation=AlterConfigOpType.SET)])
    legacy_topic_change = ConfigResource(ResourceType.TOPIC, topic,
                                         set_config={"retention.ms": "3600000"})
    alice, bob = admin(broker, "alice"), admin(broker, "bob")

    refused = [failure(alice.incremental_alter_configs([topic_change])),
               failure(alice.incremental_alter_configs([broker_change])),
               failure(alice.alter_configs([legacy_topic_change]))]
    unchanged = (topic_config(broker, topic, "retention.ms"),
                 broker_config(broker, "log.retention.ms"))
    grant(broker, "User:alice", AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, topic)
    grant(broker, "User:bob", AclOperation.ALTER_CONFIGS, ResourceType.BROKER, CLUSTER_NAME)
    done(alice.incremental_alter_configs([topic_change]))
    done(bob.incremental_alter_configs([broker_change]))

    assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED,
                       KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                       KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert unchanged == (retention_then, broker_retention_then)
    assert topic_config(broker, topic, "retention.ms") == "3600000"
    assert broker_config(broker, "log.retention.ms") == "691200000"


# --- Cluster -------------------------------------------------------------------------------


def test_cluster_operations_need_their_acl_on_the_cluster(broker):
    topic = "cluster-operated"
    create_topics(broker, topic)
    partition = kafka.TopicPartition(topic, 0)
    grant(broker, "User:bob", AclOperation.ALTER, ResourceType.BROKER, CLUSTER_NAME)
    grant(broker, "User:bob", AclOperation.DESCRIBE, ResourceType.BROKER, CLUSTER_NAME)
    alice, bob = kafka_admin(broker, "alice"), kafka_admin(broker, "bob")
    try:
        # DescribeLogDirs answers CLUSTER_AUTHORIZATION_FAILED, which kafka-python reads as
        # a broker without log dirs.
        assert alice.describe_log_dirs() == [{"broker": 0, "log_dirs": []}]
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            alice.elect_leaders(0, {topic: [0]})
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            alice.list_partition_reassignments()
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            alice.alter_partition_reassignments({partition: [0]})

        [described] = bob.describe_log_dirs()
        assert described["log_dirs"]
        assert bob.elect_leaders(0, {topic: [0]}, raise_errors=False).error_code == 0
        assert bob.list_partition_reassignments() == {}
        assert bob.alter_partition_reassignments({partition: [0]}) == {partition: None}
    finally:
        alice.close()
        bob.close()


# --- Rules ---------------------------------------------------------------------------------


@pytest.mark.clients(*CLIENT_LIBRARIES)
@pytest.mark.parametrize("pattern_type", [ResourcePatternType.LITERAL,
                                          ResourcePatternType.PREFIXED],
                         ids=["literal", "prefixed"])
def test_an_allow_acl_literal_or_prefixed_lets_a_principal_produce_and_consume(
        broker, client, pattern_type):
    prefix = f"granted-{pattern_type.name.lower()}-"
    topic = f"{prefix}{client.name}"
    create_topics(broker, topic)
    named = topic if pattern_type == ResourcePatternType.LITERAL else prefix
    for operation in (AclOperation.WRITE, AclOperation.READ):
        grant(broker, "User:alice", operation, ResourceType.TOPIC, named,
              pattern_type=pattern_type)

    client.produce(broker.bootstrap_servers, topic, RECORDS,
                   security=producer_settings(client, "alice"))
    got = client.consume(broker.bootstrap_servers, topic, len(RECORDS),
                         security=security(client.name, "alice"))

    assert [(c.key, c.value) for c in got] == [(r["key"], r["value"]) for r in RECORDS]


def test_a_deny_wins_over_any_allow(broker):
    create_topics(broker, "deny-open", "deny-closed")
    grant(broker, "User:alice", AclOperation.ALL, ResourceType.TOPIC, "deny-",
          pattern_type=ResourcePatternType.PREFIXED)
    grant(broker, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "deny-closed",
          permission=AclPermissionType.DENY)
    grant(broker, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "deny-open",
          permission=AclPermissionType.DENY)
    confluent = CLIENTS["confluent-kafka"]

    # ALL on every "deny-" topic, but WRITE denied on one and DESCRIBE on the other: neither
    # can be written, and the one alice may not DESCRIBE is not even listed.
    for topic in ("deny-closed", "deny-open"):
        with pytest.raises(KafkaException) as refused:
            confluent.produce(broker.bootstrap_servers, topic, RECORDS,
                              security=security(confluent.name, "alice"))
        assert is_topic_authorization_failed(refused.value), refused.value
    listed = set(admin(broker, "alice").list_topics(timeout=TIMEOUT_SECONDS).topics)

    assert "deny-closed" in listed and "deny-open" not in listed
    assert high_watermark(broker, "deny-closed") == high_watermark(broker, "deny-open") == 0


def test_the_super_user_needs_no_acl(broker):
    topic = "super-user-topic"
    confluent = CLIENTS["confluent-kafka"]
    settings = security(confluent.name, "admin")
    superuser = admin(broker)

    done(superuser.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT_SECONDS))
    confluent.produce(broker.bootstrap_servers, topic, RECORDS, security=settings)
    got = confluent.consume(broker.bootstrap_servers, topic, len(RECORDS), security=settings)
    done(superuser.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(
            "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])]))
    done(superuser.create_partitions([NewPartitions(topic, 2)],
                                     request_timeout=TIMEOUT_SECONDS))
    done(superuser.delete_records([confluent_kafka.TopicPartition(topic, 0, 1)],
                                  request_timeout=TIMEOUT_SECONDS))
    retention = topic_config(broker, topic, "retention.ms")
    done(superuser.delete_topics([topic], request_timeout=TIMEOUT_SECONDS))

    assert len(got) == len(RECORDS)
    assert retention == "3600000"
    assert topic not in topic_names(broker)


def test_the_broker_keeps_serving_an_authorized_client_while_others_are_refused(broker):
    topic = "served-while-refusing"
    rounds = 5
    create_topics(broker, topic)
    for operation in (AclOperation.WRITE, AclOperation.READ):
        grant(broker, "User:alice", operation, ResourceType.TOPIC, topic)
    confluent = CLIENTS["confluent-kafka"]
    delivery_errors: list[KafkaError | None] = []
    refused: list[BaseException] = []

    # One producer of alice's, on one connection, between each of bob's refused attempts.
    alice = confluent_kafka.Producer(librdkafka(broker, "alice"))
    try:
        for _ in range(rounds):
            for record in RECORDS:
                alice.produce(topic, record["value"], key=record["key"],
                              on_delivery=lambda error, _: delivery_errors.append(error))
            with pytest.raises(KafkaException) as bob:
                confluent.produce(broker.bootstrap_servers, topic, RECORDS,
                                  security=security(confluent.name, "bob"))
            refused.append(bob.value)
    finally:
        unsent = alice.flush(TIMEOUT_SECONDS)
        alice.close()
    got = confluent.consume(broker.bootstrap_servers, topic, rounds * len(RECORDS),
                            security=security(confluent.name, "alice"))

    assert unsent == 0
    assert delivery_errors == [None] * rounds * len(RECORDS)
    assert all(is_topic_authorization_failed(error) for error in refused), refused
    assert [c.value for c in got] == [r["value"] for r in RECORDS] * rounds

"""The admin APIs, driven as an operator drives them: confluent-kafka's ``AdminClient``, and
kafka-python's ``KafkaAdminClient`` where it reaches what librdkafka does not (log dirs,
DescribeTopicPartitions, the newest request versions). Errors are checked as Kafka sends
them: the code and the broker's message."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient

TIMEOUT_SECONDS = 10


@pytest.fixture
def admin(odradek_broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})


@pytest.fixture
def kafka_admin(odradek_broker):
    client = KafkaAdminClient(bootstrap_servers=odradek_broker.bootstrap_servers)
    yield client
    client.close()


def done(futures: dict) -> dict:
    """Waits for every future of an admin call; the results by key."""
    return {key: future.result(timeout=TIMEOUT_SECONDS) for key, future in futures.items()}


def failure(futures: dict) -> KafkaError:
    """The error of the one future of an admin call, which must fail."""
    [future] = futures.values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_SECONDS)
    return raised.value.args[0]


def create(admin: AdminClient, *topics: NewTopic, **options) -> None:
    done(admin.create_topics(list(topics), request_timeout=TIMEOUT_SECONDS, **options))


def exists(admin: AdminClient, topic: str) -> bool:
    [future] = admin.describe_topics(TopicCollection([topic])).values()
    try:
        future.result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        return False
    return True


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=TIMEOUT_SECONDS).topics[topic].partitions)


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return done(admin.describe_configs([resource]))[resource]


def broker_configs(admin: AdminClient) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.BROKER, "0")
    return done(admin.describe_configs([resource]))[resource]


def incremental(admin: AdminClient, restype: ResourceType, name: str,
                *changes: tuple[str, AlterConfigOpType, str | None], **options) -> dict:
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, op, value in changes]
    resource = ConfigResource(restype, name, incremental_configs=entries)
    return admin.incremental_alter_configs([resource], **options)


def produce(bootstrap_servers: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    """Produces ``values`` to partition 0; the delivery error of each (None: delivered)."""
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _: errors.append(err))
        producer.flush(TIMEOUT_SECONDS)
    return errors


def first_offset_from_beginning(bootstrap_servers: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        message = consumer.poll(TIMEOUT_SECONDS)
        assert message is not None and message.error() is None
        return message.offset()
    finally:
        consumer.close()


# --- CreateTopics -------------------------------------------------------------------------


def test_a_created_topic_has_its_partitions_and_its_configs(admin):
    create(admin, NewTopic("orders", 3, 1, config={"cleanup.policy": "compact",
                                                   "retention.ms": "3600000"}))

    assert partition_count(admin, "orders") == 3
    configs = topic_configs(admin, "orders")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


@pytest.mark.odradek_config(num_partitions=4)
def test_partitions_and_replication_factor_left_out_take_the_broker_defaults(admin):
    create(admin, NewTopic("defaults"))

    assert partition_count(admin, "defaults") == 4


def test_validate_only_checks_a_topic_but_creates_nothing(admin):
    create(admin, NewTopic("checked", 2, 1), validate_only=True)

    assert not exists(admin, "checked")


def test_creating_an_existing_topic_fails_with_topic_already_exists(admin):
    create(admin, NewTopic("twice", 1, 1))

    error = failure(admin.create_topics([NewTopic("twice", 1, 1)]))

    assert error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert error.str() == "Topic 'twice' already exists."


def test_a_replication_factor_above_the_broker_count_is_refused(admin):
    error = failure(admin.create_topics([NewTopic("replicated", 1, 3)]))

    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert error.str() == "Replication factor: 3 larger than available brokers: 1."


def test_zero_partitions_are_refused(kafka_admin):
    from kafka.admin import NewTopic as KafkaPythonNewTopic
    from kafka.errors import InvalidPartitionsError

    with pytest.raises(InvalidPartitionsError, match="Number of partitions must be larger than 0"):
        kafka_admin.create_topics([KafkaPythonNewTopic("empty", 0, 1)])


def test_an_absurd_partition_count_is_refused_without_creating_anything(admin):
    error = failure(admin.create_topics([NewTopic("huge", 100_000, 1)]))

    assert error.code() == KafkaError.POLICY_VIOLATION
    assert not exists(admin, "huge")


def test_adding_an_absurd_number_of_partitions_is_refused(admin):
    create(admin, NewTopic("growing", 1, 1))

    error = failure(admin.create_partitions([NewPartitions("growing", 100_000)]))

    assert error.code() == KafkaError.POLICY_VIOLATION
    assert partition_count(admin, "growing") == 1


def test_a_config_value_of_the_wrong_type_is_refused_with_kafkas_message(admin):
    error = failure(admin.create_topics([NewTopic("typed", 1, 1,
                                                  config={"retention.ms": "a week"})]))

    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == ("Invalid value a week for configuration retention.ms: "
                           "Not a number of type LONG")


def test_an_unknown_config_is_refused(admin):
    error = failure(admin.create_topics([NewTopic("unknown", 1, 1, config={"colour": "blue"})]))

    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Unknown topic config name: colour"


def test_an_invalid_topic_name_is_refused(admin):
    error = failure(admin.create_topics([NewTopic("no spaces", 1, 1)]))

    assert error.code() == KafkaError.TOPIC_EXCEPTION
    assert error.str() == ("Topic name is invalid: 'no spaces' contains one or more characters "
                           "other than ASCII alphanumerics, '.', '_' and '-'")


def test_a_name_colliding_with_an_existing_topic_through_dot_and_underscore_is_refused(admin):
    create(admin, NewTopic("metrics_eu", 1, 1))

    error = failure(admin.create_topics([NewTopic("metrics.eu", 1, 1)]))

    assert error.code() == KafkaError.TOPIC_EXCEPTION
    assert error.str() == "Topic 'metrics.eu' collides with existing topics: metrics_eu"


def test_an_explicit_assignment_to_this_broker_is_accepted(admin):
    create(admin, NewTopic("placed", 2, replica_assignment=[[0], [0]]))

    assert partition_count(admin, "placed") == 2


def test_an_explicit_assignment_to_an_unknown_broker_is_refused(admin):
    error = failure(admin.create_topics([NewTopic("misplaced", 1, replica_assignment=[[7]])]))

    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error.str() == ("The manual partition assignment includes broker 7, but no such "
                           "broker is registered.")


def test_kafka_python_on_create_topics_v7_gets_the_topic_id_layout_and_configs(kafka_admin):
    result = kafka_admin.create_topics({"modern": {"num_partitions": 2,
                                                   "configs": {"segment.ms": "60000"}}})

    [created] = result["topics"]
    assert (created["name"], created["error_code"]) == ("modern", 0)
    assert (created["num_partitions"], created["replication_factor"]) == (2, 1)
    assert created["configs"]["segment.ms"]["value"] == "60000"
    assert created["configs"]["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    [described] = kafka_admin.describe_topics(["modern"])
    assert created["topic_id"] == described["topic_id"]


# --- describe topics and DescribeTopicPartitions -------------------------------------------


def test_describe_topics_shows_each_partitions_leader_replicas_and_isr(admin):
    create(admin, NewTopic("described", 2, 1))

    [description] = done(admin.describe_topics(TopicCollection(["described"]))).values()

    assert description.name == "described"
    assert [p.id for p in description.partitions] == [0, 1]
    for partition in description.partitions:
        assert partition.leader.id == 0
        assert [n.id for n in partition.replicas] == [0]
        assert [n.id for n in partition.isr] == [0]


def test_describe_topic_partitions_pages_through_partitions_with_a_cursor(admin, kafka_admin):
    create(admin, NewTopic("paged-a", 3, 1), NewTopic("paged-b", 2, 1))

    first = kafka_admin.describe_topic_partitions(["paged-b", "paged-a"],
                                                  response_partition_limit=4)
    rest = kafka_admin.describe_topic_partitions(["paged-b", "paged-a"],
                                                 response_partition_limit=4,
                                                 cursor=first["next_cursor"])

    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in first["topics"]] == [("paged-a", [0, 1, 2]), ("paged-b", [0])]
    assert first["next_cursor"] == {"topic_name": "paged-b", "partition_index": 1}
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in rest["topics"]] == [("paged-b", [1])]
    assert rest["next_cursor"] is None
    partition = rest["topics"][0]["partitions"][0]
    assert partition["leader_id"] == 0
    assert (partition["replica_nodes"], partition["isr_nodes"]) == ([0], [0])
    assert not partition["eligible_leader_replicas"]


def test_describe_topic_partitions_answers_an_unknown_topic_with_its_error(kafka_admin):
    result = kafka_admin.describe_topic_partitions(["absent"])

    [topic] = result["topics"]
    assert (topic["name"], topic["error_code"]) == ("absent", 3)


# --- CreatePartitions ---------------------------------------------------------------------


def test_added_partitions_exist_and_take_records(admin, odradek_broker):
    create(admin, NewTopic("growing", 1, 1))

    done(admin.create_partitions([NewPartitions("growing", 3)]))

    assert partition_count(admin, "growing") == 3
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    errors = []
    producer.produce("growing", b"value", partition=2,
                     on_delivery=lambda err, _: errors.append(err))
    producer.flush(TIMEOUT_SECONDS)
    assert errors == [None]


def test_fewer_partitions_than_now_are_refused_with_kafkas_message(admin):
    create(admin, NewTopic("shrinking", 3, 1))

    error = failure(admin.create_partitions([NewPartitions("shrinking", 2)]))

    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert error.str() == "Topic currently has 3 partitions, which is higher than the requested 2."


def test_the_same_partition_count_is_refused(admin):
    create(admin, NewTopic("steady", 2, 1))

    error = failure(admin.create_partitions([NewPartitions("steady", 2)]))

    assert error.code() == KafkaError.INVALID_PARTITIONS
    assert error.str() == "Topic already has 2 partitions."


def test_validate_only_create_partitions_adds_none(admin):
    create(admin, NewTopic("unchanged", 1, 1))

    done(admin.create_partitions([NewPartitions("unchanged", 4)], validate_only=True))

    assert partition_count(admin, "unchanged") == 1


# --- DescribeConfigs ----------------------------------------------------------------------


def test_a_topic_without_overrides_shows_defaults(admin):
    create(admin, NewTopic("plain", 1, 1))

    entry = topic_configs(admin, "plain")["max.message.bytes"]

    assert entry.value == "1048588"
    assert entry.is_default
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value
    assert not entry.is_read_only


@pytest.mark.odradek_config(log_retention_hours=24)
def test_a_topic_inherits_a_static_broker_value_and_shows_its_synonyms(admin, kafka_admin):
    from kafka.admin import ConfigResource as KafkaPythonConfigResource

    create(admin, NewTopic("inheriting", 1, 1))

    entry = topic_configs(admin, "inheriting")["retention.ms"]
    described = kafka_admin.describe_configs(
        [KafkaPythonConfigResource("TOPIC", "inheriting", {"retention.ms": None})],
        include_synonyms=True, config_filter="all")

    assert entry.value == "86400000"
    assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value
    synonyms = described["topic"]["inheriting"]["retention.ms"]["synonyms"]
    assert [(s["name"], s["value"], s["source"]) for s in synonyms] == [
        ("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]


def test_the_broker_resource_shows_static_and_default_configs(admin, odradek_broker):
    configs = broker_configs(admin)

    assert configs["log.dirs"].value == str(odradek_broker.data_dir)
    assert configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.dirs"].is_read_only
    assert configs["num.io.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["num.io.threads"].is_read_only


def test_describing_an_unknown_topic_fails(admin):
    resource = ConfigResource(ResourceType.TOPIC, "missing")

    error = failure(admin.describe_configs([resource]))

    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------


def test_alter_configs_replaces_the_whole_override_set(admin):
    create(admin, NewTopic("replaced", 1, 1, config={"retention.ms": "1000"}))

    resource = ConfigResource(ResourceType.TOPIC, "replaced", set_config={"segment.ms": "60000"})
    done(admin.alter_configs([resource]))

    configs = topic_configs(admin, "replaced")
    assert configs["segment.ms"].value == "60000"
    assert configs["retention.ms"].is_default


def test_incremental_set_and_delete_change_one_key_each(admin):
    create(admin, NewTopic("tuned", 1, 1, config={"retention.ms": "1000"}))

    done(incremental(admin, ResourceType.TOPIC, "tuned",
                     ("segment.ms", AlterConfigOpType.SET, "60000"),
                     ("retention.ms", AlterConfigOpType.DELETE, None)))

    configs = topic_configs(admin, "tuned")
    assert configs["segment.ms"].value == "60000"
    assert configs["retention.ms"].is_default


def test_append_and_subtract_edit_the_cleanup_policy_list(admin):
    create(admin, NewTopic("policies", 1, 1))

    done(incremental(admin, ResourceType.TOPIC, "policies",
                     ("cleanup.policy", AlterConfigOpType.APPEND, "compact")))
    assert topic_configs(admin, "policies")["cleanup.policy"].value == "delete,compact"

    done(incremental(admin, ResourceType.TOPIC, "policies",
                     ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete")))
    assert topic_configs(admin, "policies")["cleanup.policy"].value == "compact"


def test_append_to_a_config_that_is_not_a_list_is_refused(admin):
    create(admin, NewTopic("scalar", 1, 1))

    error = failure(incremental(admin, ResourceType.TOPIC, "scalar",
                                ("retention.ms", AlterConfigOpType.APPEND, "5")))

    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Config value append is not allowed for config key: retention.ms"


def test_a_bad_value_names_the_resource_in_its_message(admin):
    create(admin, NewTopic("strict", 1, 1))

    error = failure(incremental(admin, ResourceType.TOPIC, "strict",
                                ("cleanup.policy", AlterConfigOpType.SET, "shred")))

    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == (
        "Invalid config value for resource ConfigResource(type=TOPIC, name='strict'): "
        "Invalid value shred for configuration cleanup.policy: "
        "String must be one of: compact, delete")


def test_validate_only_alter_changes_nothing(admin):
    create(admin, NewTopic("kept", 1, 1))

    done(incremental(admin, ResourceType.TOPIC, "kept",
                     ("retention.ms", AlterConfigOpType.SET, "1000"), validate_only=True))

    assert topic_configs(admin, "kept")["retention.ms"].is_default


def test_altering_an_unknown_topic_fails(admin):
    error = failure(incremental(admin, ResourceType.TOPIC, "nowhere",
                                ("retention.ms", AlterConfigOpType.SET, "1000")))

    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert error.str() == "The topic 'nowhere' does not exist."


def test_a_lowered_max_message_bytes_makes_bigger_records_fail(admin, odradek_broker):
    create(admin, NewTopic("small-records", 1, 1))
    assert produce(odradek_broker.bootstrap_servers, "small-records", [b"x" * 5000]) == [None]

    done(incremental(admin, ResourceType.TOPIC, "small-records",
                     ("max.message.bytes", AlterConfigOpType.SET, "1000")))

    [error] = produce(odradek_broker.bootstrap_servers, "small-records", [b"x" * 5000])
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_a_dynamic_broker_config_is_shown_inherited_and_kept_across_restarts(admin, odradek_broker):
    create(admin, NewTopic("inherits", 1, 1))

    done(incremental(admin, ResourceType.BROKER, "0",
                     ("log.retention.ms", AlterConfigOpType.SET, "7200000")))

    entry = broker_configs(admin)["log.retention.ms"]
    assert (entry.value, entry.source) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    inherited = topic_configs(admin, "inherits")["retention.ms"]
    assert (inherited.value, inherited.source) == ("7200000",
                                                   ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    odradek_broker.restart()
    restarted = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    assert broker_configs(restarted)["log.retention.ms"].value == "7200000"


def test_a_read_only_broker_config_cannot_be_altered(admin):
    error = failure(incremental(admin, ResourceType.BROKER, "0",
                                ("log.dirs", AlterConfigOpType.SET, "/elsewhere")))

    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str() == "Cannot update these configs dynamically: Set(log.dirs)"


# --- DeleteTopics -------------------------------------------------------------------------


def test_a_deleted_topic_is_gone_and_can_be_created_again(admin):
    create(admin, NewTopic("doomed", 2, 1))

    done(admin.delete_topics(["doomed"], request_timeout=TIMEOUT_SECONDS))

    assert not exists(admin, "doomed")
    create(admin, NewTopic("doomed", 1, 1))
    assert partition_count(admin, "doomed") == 1


def test_deleting_an_unknown_topic_fails(admin):
    error = failure(admin.delete_topics(["never-was"]))

    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_on_delete_topics_v6_deletes(kafka_admin, admin):
    create(admin, NewTopic("by-kafka-python", 1, 1))

    kafka_admin.delete_topics(["by-kafka-python"])

    assert not exists(admin, "by-kafka-python")


# --- DescribeCluster ----------------------------------------------------------------------


def test_describe_cluster_names_this_broker_as_the_only_node_and_the_controller(
        admin, odradek_broker):
    cluster = admin.describe_cluster(request_timeout=TIMEOUT_SECONDS).result()

    [node] = cluster.nodes
    assert (node.id, node.host, node.port) == (0, "127.0.0.1", odradek_broker.port)
    assert cluster.controller.id == 0
    assert cluster.cluster_id == odradek_broker.broker.metadata.cluster_id


# --- DeleteRecords ------------------------------------------------------------------------


def test_deleted_records_are_skipped_by_a_consumer_reading_from_the_beginning(
        admin, odradek_broker):
    create(admin, NewTopic("trimmed", 1, 1))
    produce(odradek_broker.bootstrap_servers, "trimmed", [b"%d" % i for i in range(10)])

    [deleted] = done(admin.delete_records([TopicPartition("trimmed", 0, 6)])).values()

    assert deleted.low_watermark == 6
    assert first_offset_from_beginning(odradek_broker.bootstrap_servers, "trimmed") == 6


def test_deleted_records_stay_deleted_after_a_restart(admin, odradek_broker):
    create(admin, NewTopic("trimmed-for-good", 1, 1))
    produce(odradek_broker.bootstrap_servers, "trimmed-for-good", [b"a", b"b", b"c"])
    done(admin.delete_records([TopicPartition("trimmed-for-good", 0, 2)]))

    odradek_broker.restart()

    assert first_offset_from_beginning(odradek_broker.bootstrap_servers, "trimmed-for-good") == 2


def test_deleting_records_past_the_high_watermark_is_out_of_range(admin, odradek_broker):
    create(admin, NewTopic("short", 1, 1))
    produce(odradek_broker.bootstrap_servers, "short", [b"a", b"b"])

    error = failure(admin.delete_records([TopicPartition("short", 0, 3)]))

    assert error.code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_kafka_python_deletes_records_up_to_the_high_watermark(kafka_admin, admin, odradek_broker):
    from kafka import TopicPartition as KafkaPythonTopicPartition

    create(admin, NewTopic("emptied", 1, 1))
    produce(odradek_broker.bootstrap_servers, "emptied", [b"a", b"b", b"c"])

    result = kafka_admin.delete_records({KafkaPythonTopicPartition("emptied", 0): -1})

    assert result[KafkaPythonTopicPartition("emptied", 0)]["low_watermark"] == 3


# --- DescribeLogDirs ----------------------------------------------------------------------


def test_describe_log_dirs_lists_each_partition_with_its_size(kafka_admin, admin, odradek_broker):
    create(admin, NewTopic("stored", 2, 1))
    produce(odradek_broker.bootstrap_servers, "stored", [b"x" * 100])

    [broker] = kafka_admin.describe_log_dirs({"stored": [0, 1]})

    [log_dir] = broker["log_dirs"]
    assert log_dir["log_dir"] == str(odradek_broker.data_dir.absolute())
    assert log_dir["error_code"] == 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    [topic] = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] > 100 and sizes[1] == 0
    assert all(p["offset_lag"] == 0 for p in topic["partitions"])

"""The admin handlers, request by request, in the versions and corners clients rarely reach:
each request is built as kio would parse it, answered by a real broker's handler, and the
response is encoded as it would go on the wire."""

from __future__ import annotations

import inspect
import uuid

import pytest
from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.framing import encode_response
from odradek.protocol.messages import build
from odradek.server.config import ConfigSource

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE = 0, 1


class Admin:
    """Calls one broker's handlers directly, as its dispatcher would."""

    def __init__(self, embedded) -> None:
        self.embedded = embedded

    def __call__(self, api_key: ApiKey, version: int, **body):
        request = build(request_class(api_key, version), **body)

        async def handle():
            outcome = self.embedded.handle(api_key, version, request)
            return await outcome if inspect.isawaitable(outcome) else outcome

        response = self.embedded.call(handle())
        encode_response(1, response)  # must be encodable in the version asked for
        return response

    def create(self, name: str, partitions: int = 1, version: int = 7, *,
               configs: dict[str, str | None] | None = None, timeout: int = 5000,
               validate_only: bool = False, assignments=(), replication_factor: int = -1):
        response = self(ApiKey.CREATE_TOPICS, version, timeout=timeout,
                        validate_only=validate_only, topics=[{
                            "name": name, "num_partitions": partitions,
                            "replication_factor": replication_factor,
                            "assignments": [{"partition_index": i, "broker_ids": b}
                                            for i, b in enumerate(assignments)],
                            "configs": [{"name": k, "value": v}
                                        for k, v in (configs or {}).items()],
                        }])
        [result] = response.topics
        return result

    def describe_configs(self, resource_type: int, name: str, keys=None, version: int = 4, **flags):
        response = self(ApiKey.DESCRIBE_CONFIGS, version, resources=[{
            "resource_type": resource_type, "resource_name": name, "configuration_keys": keys,
        }], include_synonyms=flags.get("synonyms", False),
            include_documentation=flags.get("documentation", False))
        [result] = response.results
        return result

    def alter(self, *resources, validate_only: bool = False):
        """Legacy AlterConfigs: resources are (type, name, {key: value})."""
        response = self(ApiKey.ALTER_CONFIGS, 2, validate_only=validate_only, resources=[
            {"resource_type": t, "resource_name": n,
             "configs": [{"name": k, "value": v} for k, v in configs]}
            for t, n, configs in resources
        ])
        return [(r.error_code, r.error_message) for r in response.responses]

    def incremental(self, resource_type: int, name: str, *ops, validate_only: bool = False):
        response = self(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only,
                        resources=[{"resource_type": resource_type, "resource_name": name,
                                    "configs": [{"name": k, "config_operation": op, "value": v}
                                                for k, op, v in ops]}])
        [result] = response.responses
        return result.error_code, result.error_message

    def describe_topic_partitions(self, *names, limit: int = 2000, cursor=None):
        response = self(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0,
                        topics=[{"name": n} for n in names],
                        response_partition_limit=limit, cursor=cursor)
        pages = [(t.name, t.error_code, [p.partition_index for p in t.partitions])
                 for t in response.topics]
        cursor = response.next_cursor
        return pages, cursor and (cursor.topic_name, cursor.partition_index)


@pytest.fixture
def admin(odradek_broker) -> Admin:
    return Admin(odradek_broker)


def configs_of(result) -> dict:
    return {c.name: c for c in result.configs}


# --- CreateTopics -------------------------------------------------------------------------


def test_create_v7_answers_topic_id_layout_and_the_configs_describe_would_show(
        admin, odradek_broker):
    result = admin.create("orders", 3, configs={"retention.ms": "1000"})

    assert result.error_code == ErrorCode.none
    assert result.topic_id == odradek_broker.broker.metadata.topic("orders").topic_id
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    retention = configs_of(result)["retention.ms"]
    assert (retention.value, retention.config_source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs_of(result)["segment.ms"].config_source == ConfigSource.DEFAULT_CONFIG


def test_validate_only_answers_the_layout_without_a_topic_id(admin, odradek_broker):
    result = admin.create("planned", 2, validate_only=True)

    assert (result.error_code, result.topic_id, result.num_partitions) == (ErrorCode.none, None, 2)
    assert odradek_broker.broker.metadata.topic("planned") is None


def test_a_zero_timeout_creates_the_topic_but_answers_request_timed_out(admin, odradek_broker):
    result = admin.create("hurried", timeout=0)

    assert result.error_code == ErrorCode.request_timed_out
    assert (result.configs, result.num_partitions) == ((), -1)
    assert odradek_broker.broker.metadata.topic("hurried") is not None


def test_a_topic_named_twice_in_one_request_fails_both_entries(admin):
    entry = {"name": "twin", "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}

    response = admin(ApiKey.CREATE_TOPICS, 5, timeout=5000, validate_only=False,
                     topics=[entry, entry])

    assert [(t.error_code, t.error_message) for t in response.topics] == [
        (ErrorCode.invalid_request, "Found multiple entries for this topic.")] * 2


def test_the_kraft_metadata_topic_cannot_be_created(admin):
    result = admin.create("__cluster_metadata")

    assert (result.error_code, result.error_message) == (
        ErrorCode.invalid_request, "Creation of internal topic __cluster_metadata is prohibited.")


@pytest.mark.parametrize(("layout", "error", "message"), [
    ({"partitions": 0}, ErrorCode.invalid_partitions,
     "Number of partitions must be larger than 0."),
    ({"replication_factor": 0}, ErrorCode.invalid_replication_factor,
     "Replication factor must be larger than 0."),
    ({"partitions": 2, "assignments": [[0], [0]]}, ErrorCode.invalid_request,
     "Both numPartitions or replicationFactor and replicasAssignments were set. "
     "Both cannot be used at the same time."),
    ({"partitions": -1, "assignments": [[0], [0, 0]]}, ErrorCode.invalid_replica_assignment,
     "All partitions should have the same number of replicas"),
    ({"configs": {"retention.ms": None, "segment.ms": None}}, ErrorCode.invalid_request,
     "Null value not supported for topic configs : retention.ms,segment.ms"),
    ({"configs": {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}},
     ErrorCode.invalid_config,
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
])
def test_a_bad_layout_or_config_is_refused_with_kafkas_error(admin, layout, error, message):
    result = admin.create("bad", **layout)

    assert (result.error_code, result.error_message) == (error, message)
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, ())


def test_old_versions_answer_without_the_v5_fields(admin):
    result = admin.create("legacy", 2, version=2)

    assert result.error_code == ErrorCode.none
    assert not hasattr(result, "configs")


# --- DeleteTopics -------------------------------------------------------------------------


def test_v6_deletes_a_topic_named_by_its_id(admin, odradek_broker):
    admin.create("by-id")
    topic_id = odradek_broker.broker.metadata.topic("by-id").topic_id

    response = admin(ApiKey.DELETE_TOPICS, 6, timeout=5000,
                     topics=[{"name": None, "topic_id": topic_id}])

    [result] = response.responses
    assert (result.name, result.topic_id, result.error_code) == ("by-id", topic_id, ErrorCode.none)
    assert odradek_broker.broker.metadata.topic("by-id") is None


def test_an_unknown_topic_id_is_unknown_topic_id(admin):
    missing = uuid.uuid4()

    response = admin(ApiKey.DELETE_TOPICS, 6, timeout=5000,
                     topics=[{"name": None, "topic_id": missing}])

    [result] = response.responses
    assert (result.name, result.topic_id, result.error_code) == (
        None, missing, ErrorCode.unknown_topic_id)


def test_naming_a_topic_by_name_and_id_at_once_fails_the_whole_request(admin, odradek_broker):
    admin.create("kept")

    response = admin(ApiKey.DELETE_TOPICS, 6, timeout=5000, topics=[
        {"name": "kept", "topic_id": None},
        {"name": "kept", "topic_id": uuid.uuid4()},
    ])

    assert [r.error_code for r in response.responses] == [ErrorCode.invalid_request] * 2
    assert odradek_broker.broker.metadata.topic("kept") is not None


@pytest.mark.odradek_config(delete_topic_enable="false")
@pytest.mark.parametrize(("version", "error"), [
    (2, ErrorCode.invalid_request), (3, ErrorCode.topic_deletion_disabled),
])
def test_disabled_deletion_is_refused_with_the_versions_error(admin, version, error):
    admin.create("permanent")

    response = admin(ApiKey.DELETE_TOPICS, version, timeout=5000, topic_names=["permanent"])

    assert [r.error_code for r in response.responses] == [error]


# --- CreatePartitions ---------------------------------------------------------------------


def create_partitions(admin: Admin, *topics: tuple[str, int, list | None], version: int = 3):
    response = admin(ApiKey.CREATE_PARTITIONS, version, timeout=5000, validate_only=False,
                     topics=[{"name": n, "count": c,
                              "assignments": None if a is None else [{"broker_ids": b} for b in a]}
                             for n, c, a in topics])
    return [(r.name, r.error_code, r.error_message) for r in response.results]


def test_a_topic_named_twice_gets_one_duplicate_error(admin):
    admin.create("doubled")

    assert create_partitions(admin, ("doubled", 2, None), ("doubled", 3, None)) == [
        ("doubled", ErrorCode.invalid_request, "Duplicate topic in request.")]


@pytest.mark.parametrize(("assignments", "message"), [
    ([[5]], "Unknown broker(s) in replica assignment: 5."),
    ([[0]], "Increasing the number of partitions by 2 but 1 assignments provided."),
    ([[0], []], "Cannot have replication factor of 0 for partition id 2."),
    ([[0], [0, 0]],
     "Duplicate brokers not allowed in replica assignment: 0, 0 for partition id 2."),
])
def test_a_bad_assignment_for_new_partitions_is_refused(admin, assignments, message):
    admin.create("assigned")

    assert create_partitions(admin, ("assigned", 3, assignments)) == [
        ("assigned", ErrorCode.invalid_replica_assignment, message)]


def test_an_assignment_on_this_broker_adds_the_partitions(admin, odradek_broker):
    admin.create("extended")

    assert create_partitions(admin, ("extended", 3, [[0], [0]])) == [
        ("extended", ErrorCode.none, None)]
    assert len(odradek_broker.broker.metadata.topic("extended").partitions) == 3


# --- DescribeConfigs ----------------------------------------------------------------------


def test_only_the_keys_asked_for_are_described(admin):
    admin.create("filtered")

    result = admin.describe_configs(TOPIC, "filtered", keys=["retention.ms", "cleanup.policy"])

    assert sorted(c.name for c in result.configs) == ["cleanup.policy", "retention.ms"]


def test_documentation_and_type_come_when_asked_for(admin):
    admin.create("documented")

    [entry] = admin.describe_configs(TOPIC, "documented", keys=["retention.ms"],
                                     documentation=True).configs

    assert entry.documentation
    assert entry.config_type == 5  # LONG


def test_an_invalid_topic_name_is_invalid_topic_exception(admin):
    result = admin.describe_configs(TOPIC, "a/b")

    assert result.error_code == ErrorCode.invalid_topic_exception
    assert result.error_message.startswith("Topic name is invalid: 'a/b' contains")


@pytest.mark.parametrize(("name", "message"), [
    ("5", "Unexpected broker id, expected 0 or empty string, but received 5"),
    ("zero", "Broker id must be an integer, but it is: zero"),
])
def test_another_brokers_configs_are_not_ours_to_describe(admin, name, message):
    result = admin.describe_configs(BROKER, name)

    assert (result.error_code, result.error_message, result.configs) == (
        ErrorCode.invalid_request, message, ())


def test_the_cluster_default_resource_lists_only_cluster_defaults(admin):
    result = admin.describe_configs(BROKER, "")

    assert (result.error_code, result.configs) == (ErrorCode.none, ())


def test_broker_loggers_are_described_with_log4j_levels(admin):
    result = admin.describe_configs(BROKER_LOGGER, "0", keys=["root"])

    [root] = result.configs
    assert root.value in {"DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
    assert root.config_source == ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG


def test_an_unknown_resource_type_is_an_invalid_request(admin):
    result = admin.describe_configs(3, "whatever")

    assert result.error_code == ErrorCode.invalid_request


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------


def test_a_resource_named_twice_fails_every_entry(admin):
    admin.create("repeated")
    resource = (TOPIC, "repeated", [("retention.ms", "1000")])

    assert admin.alter(resource, resource) == [
        (ErrorCode.invalid_request, "Each resource must appear at most once.")] * 2


@pytest.mark.parametrize(("configs", "message"), [
    ([("retention.ms", "1"), ("retention.ms", "2")], "Error due to duplicate config keys"),
    ([("retention.ms", None)], "Null value not supported for : retention.ms"),
])
def test_duplicate_keys_and_null_values_are_invalid_requests(admin, configs, message):
    admin.create("checked")

    assert admin.alter((TOPIC, "checked", configs)) == [(ErrorCode.invalid_request, message)]


def test_the_default_topic_resource_cannot_be_altered(admin):
    assert admin.alter((TOPIC, "", [("retention.ms", "1")])) == [
        (ErrorCode.invalid_request, "Default topic resources are not allowed.")]


def test_an_unknown_topic_config_is_invalid_config_without_the_resource(admin):
    admin.create("named")

    assert admin.alter((TOPIC, "named", [("colour", "blue")])) == [
        (ErrorCode.invalid_config, "Unknown topic config name: colour")]


def test_legacy_alter_of_this_broker_replaces_its_dynamic_configs(admin, odradek_broker):
    assert admin.alter((BROKER, "0", [("num.io.threads", "4")])) == [(ErrorCode.none, None)]
    assert admin.alter((BROKER, "0", [("log.cleaner.backoff.ms", "100")])) == [
        (ErrorCode.none, None)]

    assert odradek_broker.broker.metadata.broker_configs() == {"log.cleaner.backoff.ms": "100"}


def test_cluster_defaults_are_set_on_resource_empty_and_shown_with_their_source(
        admin, odradek_broker):
    assert admin.incremental(BROKER, "", ("log.retention.ms", SET, "3600000")) == (
        ErrorCode.none, None)

    [default] = admin.describe_configs(BROKER, "").configs
    [mine] = admin.describe_configs(BROKER, "0", keys=["log.retention.ms"]).configs
    assert (default.name, default.value) == ("log.retention.ms", "3600000")
    assert (mine.value, mine.config_source) == (
        "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    odradek_broker.restart()
    [kept] = admin.describe_configs(BROKER, "").configs
    assert kept.value == "3600000"


def test_per_broker_configs_cannot_be_cluster_defaults(admin):
    assert admin.incremental(BROKER, "", ("listeners", SET, "PLAINTEXT://:9093")) == (
        ErrorCode.invalid_request,
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listeners)")


def test_a_bad_dynamic_broker_value_is_an_invalid_request(admin):
    error, message = admin.incremental(BROKER, "0", ("num.io.threads", SET, "many"))

    assert error == ErrorCode.invalid_request
    assert message == ("Invalid value many for configuration num.io.threads: "
                       "Not a number of type INT")


def test_validate_only_leaves_the_broker_unchanged(admin, odradek_broker):
    response = admin.incremental(BROKER, "0", ("num.io.threads", SET, "4"), validate_only=True)

    assert response == (ErrorCode.none, None)
    assert odradek_broker.broker.metadata.broker_configs() == {}


def test_an_unknown_operation_is_an_invalid_request(admin):
    admin.create("operated")

    assert admin.incremental(TOPIC, "operated", ("retention.ms", 9, "1")) == (
        ErrorCode.invalid_request, "Unknown operations type 9")


def test_delete_needs_no_value_but_set_does(admin):
    admin.create("valued", configs={"retention.ms": "1000"})

    assert admin.incremental(TOPIC, "valued", ("retention.ms", DELETE, None)) == (
        ErrorCode.none, None)
    assert admin.incremental(TOPIC, "valued", ("retention.ms", SET, None)) == (
        ErrorCode.invalid_request, "Null value not supported for : retention.ms")


def test_broker_loggers_cannot_be_altered_through_legacy_alter_configs(admin):
    assert admin.alter((BROKER_LOGGER, "0", [("root", "DEBUG")])) == [
        (ErrorCode.invalid_request, "Unknown resource type 8")]


# --- DescribeCluster ----------------------------------------------------------------------


def test_v0_describes_the_cluster(admin, odradek_broker):
    response = admin(ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False)

    assert response.error_code == ErrorCode.none
    assert response.cluster_id == odradek_broker.broker.metadata.cluster_id
    assert [(b.broker_id, b.port) for b in response.brokers] == [(0, odradek_broker.port)]
    assert response.controller_id == 0


@pytest.mark.parametrize(("endpoint_type", "error", "message"), [
    (2, ErrorCode.mismatched_endpoint_type,
     "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
     "CONTROLLER"),
    (7, ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 7"),
])
def test_a_broker_answers_only_for_broker_endpoints(admin, endpoint_type, error, message):
    response = admin(ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False,
                     endpoint_type=endpoint_type)

    assert (response.error_code, response.error_message, response.brokers) == (error, message, ())


# --- DeleteRecords ------------------------------------------------------------------------


def delete_records(admin: Admin, topic: str, *offsets: tuple[int, int]):
    response = admin(ApiKey.DELETE_RECORDS, 2, timeout=5000, topics=[{
        "name": topic, "partitions": [{"partition_index": p, "offset": o} for p, o in offsets]}])
    [result] = response.topics
    return [(p.partition_index, p.error_code, p.low_watermark) for p in result.partitions]


def test_deleting_to_the_high_watermark_of_an_empty_partition_leaves_it_at_zero(admin):
    admin.create("empty", 2)

    assert delete_records(admin, "empty", (0, -1), (1, 1), (2, 0), (0, -5)) == [
        (0, ErrorCode.none, 0),
        (1, ErrorCode.offset_out_of_range, -1),
        (2, ErrorCode.unknown_topic_or_partition, -1),
        (0, ErrorCode.offset_out_of_range, -1),
    ]


def test_records_of_a_compacted_topic_cannot_be_deleted(admin):
    admin.create("compacted", configs={"cleanup.policy": "compact"})

    assert delete_records(admin, "compacted", (0, 0)) == [(0, ErrorCode.policy_violation, -1)]


def test_records_of_internal_topics_cannot_be_deleted(admin):
    admin.create("__consumer_offsets")

    assert delete_records(admin, "__consumer_offsets", (0, 0)) == [
        (0, ErrorCode.invalid_topic_exception, -1)]


# --- DescribeLogDirs ----------------------------------------------------------------------


def test_null_topics_describe_every_partition_of_every_log_dir(admin, odradek_broker):
    admin.create("first", 2)
    admin.create("second")

    response = admin(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)

    [result] = response.results
    assert result.log_dir == str(odradek_broker.data_dir.absolute())
    assert sorted((t.name, [p.partition_index for p in t.partitions]) for t in result.topics) == [
        ("first", [0, 1]), ("second", [0])]
    assert result.total_bytes >= result.usable_bytes > 0


def test_topics_without_a_requested_partition_here_are_left_out(admin):
    admin.create("present")

    response = admin(ApiKey.DESCRIBE_LOG_DIRS, 1,
                     topics=[{"topic": "present", "partitions": [5]},
                             {"topic": "absent", "partitions": [0]}])

    [result] = response.results
    assert result.topics == ()


# --- DescribeTopicPartitions --------------------------------------------------------------


def test_without_names_every_topic_is_listed_in_name_order(admin):
    admin.create("b-topic", 2)
    admin.create("a-topic")

    assert admin.describe_topic_partitions() == (
        [("a-topic", ErrorCode.none, [0]), ("b-topic", ErrorCode.none, [0, 1])], None)


def test_a_full_page_points_the_cursor_at_the_next_topic(admin):
    admin.create("one", 2)
    admin.create("two")

    assert admin.describe_topic_partitions("one", "two", limit=2) == (
        [("one", ErrorCode.none, [0, 1])], ("two", 0))


def test_a_cursor_resumes_inside_a_topic(admin):
    admin.create("long", 5)

    pages = admin.describe_topic_partitions(
        "long", limit=2, cursor={"topic_name": "long", "partition_index": 2})

    assert pages == ([("long", ErrorCode.none, [2, 3])], ("long", 4))


def test_a_limit_below_one_still_returns_one_partition(admin):
    admin.create("single", 2)

    assert admin.describe_topic_partitions("single", limit=0) == (
        [("single", ErrorCode.none, [0])], ("single", 1))


def test_unknown_and_invalid_names_are_answered_with_their_errors(admin):
    assert admin.describe_topic_partitions("missing", "bad name") == ([
        ("bad name", ErrorCode.invalid_topic_exception, []),
        ("missing", ErrorCode.unknown_topic_or_partition, []),
    ], None)


@pytest.mark.parametrize("cursor", [
    {"topic_name": "elsewhere", "partition_index": 0},
    {"topic_name": "listed", "partition_index": -1},
])
def test_a_cursor_outside_the_request_fails_every_topic(admin, cursor):
    admin.create("listed")

    assert admin.describe_topic_partitions("listed", cursor=cursor) == (
        [("listed", ErrorCode.invalid_request, [])], None)

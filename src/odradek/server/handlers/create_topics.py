"""CreateTopics (key 19): checked as Kafka 3.9's ZooKeeper-mode broker checks, then created
through the metadata store, whose event makes the broker create the logs.

The checks, in Kafka's order (KafkaApis.handleCreateTopicsRequest, then per topic
ZkAdminManager.createTopics, AdminUtils.assignReplicasToBrokers and
AdminZkClient.validateTopicCreate), each answering for its topic only:

1. ``__cluster_metadata`` may not be created; a name given twice fails both entries; CREATE
   on the cluster, else on the topic, is needed (TOPIC_AUTHORIZATION_FAILED);
2. the topic exists; a config has a null value; partitions or replication factor are given
   together with an explicit assignment;
3. the partition count and replication factor (-1 takes ``num.partitions`` and
   ``default.replication.factor``) against the live brokers;
4. the name, then a collision with an existing topic through '.' versus '_' (their metric
   names would be the same), then the shape of an explicit assignment, then the configs.

``validate_only`` runs every check and creates nothing. From v5 a successful result carries
the partition count, replication factor and the topic's configs as DescribeConfigs would
show them; Kafka fills them in for validate_only too and clears them on any error, including
the REQUEST_TIMED_OUT of a topic created by a request with a zero timeout (see
:func:`~odradek.server.handlers.api_error.completion_error`). They, and the topic id, are
shown only to a client that may DESCRIBE_CONFIGS the topic; to another, the result's
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED instead (cleared with the configs
when the creation itself fails), as Kafka's ``handleCreateTopicsRequest`` answers.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode

from odradek.metadata.model import InvalidTopicError, validate_topic_name
from odradek.metadata.store import MetadataStore, TopicExistsError
from odradek.protocol.api import ApiKey
from odradek.protocol.messages import millis
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.config import (
    BrokerConfig,
    ConfigError,
    describe_topic_config,
    validate_topic_overrides,
)
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.api_error import ApiError, check_new_partitions, completion_error
from odradek.server.handlers.authorization import authorize_cluster

# CreateTopicsRequest.NO_NUM_PARTITIONS / NO_REPLICATION_FACTOR (KIP-464): broker defaults.
NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
# KRaft's log; Kafka refuses it even in ZooKeeper mode so that a migration cannot collide.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, request, metadata: MetadataStore,
                               config: BrokerConfig) -> object:
    timeout_ms = millis(request.timeout)
    occurrences = Counter(topic.name for topic in request.topics)
    names = set(occurrences) - {CLUSTER_METADATA_TOPIC}
    creatable = (names if authorize_cluster(ctx, AclOperation.CREATE)
                 else ctx.authorized_names(AclOperation.CREATE, ResourceType.TOPIC, names))
    # Topics whose configs the client may not see (nor their layout and id).
    hidden = names - ctx.authorized_names(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                          names)
    results = []
    for topic in request.topics:
        try:
            _check_request(topic.name, occurrences, creatable)
        except ApiError as error:
            results.append(_failed(topic.name, error.error_code, error.message,
                                   hidden=topic.name in hidden))
            continue
        try:
            results.append(await _create(metadata, config, topic, request.validate_only,
                                         timeout_ms, hidden=topic.name in hidden))
        except ApiError as error:
            results.append(_failed(topic.name, error.error_code, error.message))
    return ctx.respond(topics=results)


def _check_request(name: str, occurrences: Counter, creatable: set[str]) -> None:
    """KafkaApis' checks of a topic's entry, before the topic is looked at."""
    if name == CLUSTER_METADATA_TOPIC:
        raise ApiError(ErrorCode.invalid_request,
                       f"Creation of internal topic {name} is prohibited.")
    if occurrences[name] > 1:
        raise ApiError(ErrorCode.invalid_request, "Found multiple entries for this topic.")
    if name not in creatable:
        raise ApiError(ErrorCode.topic_authorization_failed, "Authorization failed.")


async def _create(store: MetadataStore, config: BrokerConfig, topic, validate_only: bool,
                  timeout_ms: int, *, hidden: bool) -> dict:
    if store.topic(topic.name) is not None:
        raise ApiError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise ApiError(ErrorCode.invalid_request,
                       f"Null value not supported for topic configs : {','.join(nulls)}")
    assignment = None
    if topic.assignments:
        if (topic.num_partitions != NO_NUM_PARTITIONS
                or topic.replication_factor != NO_REPLICATION_FACTOR):
            raise ApiError(ErrorCode.invalid_request,
                           "Both numPartitions or replicationFactor and replicasAssignments were "
                           "set. Both cannot be used at the same time.")
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        _validate_name(topic.name, store.topics())
        _validate_assignment(assignment, [b.node_id for b in store.brokers()])
        num_partitions, replication_factor = len(assignment), len(assignment[0])
    else:
        num_partitions, replication_factor = _layout(store, config, topic)
        _validate_name(topic.name, store.topics())
    configs = {c.name: c.value for c in topic.configs}
    try:
        validate_topic_overrides(configs, config)
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    topic_id = None
    if not validate_only:
        try:
            created = await store.create_topic(
                topic.name, num_partitions, replication_factor, configs,
                assignment={p: tuple(replicas) for p, replicas in assignment.items()}
                if assignment is not None else None)
        except TopicExistsError:
            raise ApiError(ErrorCode.topic_already_exists,
                           f"Topic '{topic.name}' already exists.") from None
        topic_id = None if hidden else created.topic_id
        error = completion_error(timeout_ms)
        if error is not ErrorCode.none:
            return _failed(topic.name, error, None, topic_id)
    if hidden:
        return _failed(topic.name, ErrorCode.none, None, hidden=True)
    return {
        "name": topic.name,
        "topic_id": topic_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": num_partitions,
        "replication_factor": replication_factor,
        "topic_config_error_code": ErrorCode.none,
        "configs": [
            {"name": e.name, "value": e.value, "read_only": e.read_only,
             "config_source": e.source, "is_sensitive": e.sensitive}
            for e in describe_topic_config(configs, config)
        ],
    }


def _layout(store: MetadataStore, config: BrokerConfig, topic) -> tuple[int, int]:
    """(partitions, replication factor) from the request, else from the broker defaults."""
    num_partitions = topic.num_partitions
    if num_partitions == NO_NUM_PARTITIONS:
        num_partitions = config.get("num.partitions")
    replication_factor = topic.replication_factor
    if replication_factor == NO_REPLICATION_FACTOR:
        replication_factor = config.get("default.replication.factor")
    # AdminUtils.assignReplicasToBrokers' checks.
    if num_partitions <= 0:
        raise ApiError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
    check_new_partitions(num_partitions)
    if replication_factor <= 0:
        raise ApiError(ErrorCode.invalid_replication_factor,
                       "Replication factor must be larger than 0.")
    live = len(store.brokers())
    if replication_factor > live:
        raise ApiError(ErrorCode.invalid_replication_factor,
                       f"Replication factor: {replication_factor} larger than available "
                       f"brokers: {live}.")
    return num_partitions, replication_factor


def _validate_name(name: str, existing: dict) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        raise ApiError(ErrorCode.invalid_topic_exception, str(exc)) from None
    if "." in name or "_" in name:
        unified = name.replace(".", "_")
        colliding = [t for t in existing if t.replace(".", "_") == unified]
        if colliding:
            raise ApiError(ErrorCode.invalid_topic_exception,
                           f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")


def _validate_assignment(assignment: dict[int, list[int]], live_brokers: list[int]) -> None:
    """AdminZkClient.validateTopicCreate's shape checks, then placement on live brokers.

    Kafka in ZooKeeper mode accepts replicas on brokers that do not exist (their partitions
    are simply offline); the metadata store places replicas on live brokers only, so an
    unknown broker is refused with KRaft's error instead.
    """
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise ApiError(ErrorCode.invalid_replica_assignment,
                       "All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(replicas) != len(set(replicas)):
            shown = ", ".join(f"{p} -> Buffer({', '.join(map(str, r))})"
                              for p, r in assignment.items())
            raise ApiError(ErrorCode.invalid_replica_assignment,
                           f"Duplicate replica assignment found: Map({shown})")
    if sorted(assignment) != list(range(len(assignment))):
        raise ApiError(ErrorCode.invalid_replica_assignment,
                       "partitions should be a consecutive 0-based integer sequence")
    for replicas in assignment.values():
        for broker_id in sorted(replicas):
            if broker_id not in live_brokers:
                raise ApiError(ErrorCode.invalid_replica_assignment,
                               f"The manual partition assignment includes broker {broker_id}, "
                               "but no such broker is registered.")


def _failed(name: str, error: ErrorCode, message: str | None, topic_id=None, *,
            hidden: bool = False) -> dict:
    """A result without the topic's layout and configs: failed, or ``hidden`` from the
    client."""
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": [],
            "topic_config_error_code": (ErrorCode.topic_authorization_failed if hidden
                                        else ErrorCode.none)}

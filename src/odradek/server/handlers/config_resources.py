"""Config resources, shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Kafka 3.9 checks an alteration in two steps, and the step decides the error code:

* preprocessing (ConfigAdminManager.preprocess): a resource named twice, a config key named
  twice or a null value is INVALID_REQUEST; for the broker resource, the id must be this
  broker's and the new dynamic set must validate, else INVALID_REQUEST with the config
  error's message (KAFKA-13609 keeps that code for compatibility);
* persisting (ZkAdminManager.alterConfigs / incrementalAlterConfigs): for a topic, the
  default resource "" is INVALID_REQUEST, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, an
  unknown key INVALID_CONFIG as it is, and a bad value INVALID_CONFIG prefixed with the
  resource ("Invalid config value for resource ConfigResource(type=TOPIC, name='t'): ...").

A group (KIP-848, KIP-932) has the configs of :mod:`odradek.server.group_config`; the
default resource "" is INVALID_REQUEST, an unknown key or a bad value INVALID_CONFIG, and the
group need not exist.

Authorization (KafkaApis, ConfigHelper): a topic's configs are authorized on the topic, a
group's on the group, the broker's (and its loggers') on the cluster; DESCRIBE_CONFIGS to describe them, ALTER_CONFIGS
to alter them, else TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED or
CLUSTER_AUTHORIZATION_FAILED for that resource alone. An alteration is authorized after preprocessing, before persisting: a broker
change is validated whoever asks, a topic is not looked at for a client that may not.

Not a handler module: it registers nothing.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore, group_entity
from odradek.security.acl import AclOperation
from odradek.security.acl import ResourceType as AclResourceType
from odradek.server.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_topic_overrides,
)
from odradek.server.group_config import validate_group_overrides
from odradek.server.handlers import RequestContext
from odradek.server.handlers.api_error import ApiError
from odradek.server.handlers.authorization import authorize_cluster

_JAVA_INT = re.compile(r"[+-]?[0-9]+")

# Computes a resource's new overrides from its current ones.
Alteration = Callable[[Mapping[str, str]], dict[str, str]]


class ResourceType(enum.IntEnum):
    """``ConfigResource.Type``: the ids on the wire."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32

    @classmethod
    def of(cls, value: int) -> ResourceType:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


def authorization_error(ctx: RequestContext, operation: AclOperation,
                        resource) -> ErrorCode | None:
    """The error of a client that may not do ``operation`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) on the resource's configs; None when it may, or when the type is not one
    the broker serves (its own check answers)."""
    match ResourceType.of(resource.resource_type):
        case ResourceType.TOPIC:
            if ctx.authorize(operation, AclResourceType.TOPIC, resource.resource_name):
                return None
            return ErrorCode.topic_authorization_failed
        case ResourceType.GROUP:
            if ctx.authorize(operation, AclResourceType.GROUP, resource.resource_name):
                return None
            return ErrorCode.group_authorization_failed
        case ResourceType.BROKER | ResourceType.BROKER_LOGGER | ResourceType.CLIENT_METRICS:
            if authorize_cluster(ctx, operation):
                return None
            return ErrorCode.cluster_authorization_failed
    return None


def check_alter_authorized(ctx: RequestContext, resource) -> None:
    """Raises the resource's authorization error, without a message as Kafka's alterations
    answer it, unless the client may ALTER_CONFIGS it."""
    error = authorization_error(ctx, AclOperation.ALTER_CONFIGS, resource)
    if error is not None:
        raise ApiError(error)


def resource_result(error: ApiError, resource) -> dict:
    """One resource's entry in an AlterConfigs or IncrementalAlterConfigs response."""
    return {"error_code": error.error_code, "error_message": error.message,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name}


def repeated_resources(resources) -> set[tuple[int, str]]:
    """(type, name) of resources that appear more than once in a request."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, count in counts.items() if count > 1}


def check_once(resource, repeated: set[tuple[int, str]]) -> None:
    """Every entry of a resource named twice fails."""
    if (resource.resource_type, resource.resource_name) in repeated:
        raise ApiError(ErrorCode.invalid_request, "Each resource must appear at most once.")


def check_entries(names: list[str], null_values: list[str]) -> None:
    """A config key named twice, or a null value where one is needed, is INVALID_REQUEST."""
    if len(set(names)) != len(names):
        raise ApiError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    if null_values:
        raise ApiError(ErrorCode.invalid_request,
                       f"Null value not supported for : {', '.join(null_values)}")


def broker_id(name: str, label: str) -> int:
    """A resource name as Java's ``Integer.parseInt`` reads it; ``label`` names it in errors."""
    if not _JAVA_INT.fullmatch(name) or not -(2**31) <= int(name) < 2**31:
        raise ApiError(ErrorCode.invalid_request,
                       f"{label} id must be an integer, but it is: {name}")
    return int(name)


async def alter_topic(store: MetadataStore, config: BrokerConfig, name: str,
                      alteration: Alteration, validate_only: bool) -> None:
    if not name:
        raise ApiError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    topic = store.topic(name)
    try:
        overrides = alteration(topic.configs if topic else {})
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    if topic is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    unknown = [key for key in overrides if key not in TOPIC_CONFIGS]
    if unknown:
        raise ApiError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
    try:
        validate_topic_overrides(overrides, config)
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_config,
                       f"Invalid config value for resource ConfigResource(type=TOPIC, "
                       f"name='{name}'): {exc}") from None
    if not validate_only:
        await store.set_topic_configs(name, overrides)


async def alter_group(store: MetadataStore, config: BrokerConfig, name: str,
                      alteration: Alteration, validate_only: bool) -> None:
    if not name:
        raise ApiError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    entity = group_entity(name)
    try:
        overrides = alteration(store.entity_configs().get(entity, {}))
        validate_group_overrides(overrides, config)
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    if not validate_only:
        await store.set_entity_configs(entity, overrides)


async def alter_broker(ctx: RequestContext, store: MetadataStore, config: BrokerConfig,
                       resource, alteration: Alteration, validate_only: bool) -> None:
    """Resource "<node id>": this broker's dynamic configs; "": every broker's defaults."""
    name = resource.resource_name
    per_broker = bool(name)
    if per_broker and broker_id(name, "Node") != config.node_id:
        raise ApiError(ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {config.node_id}, but received {name}")
    try:
        overrides = alteration(config.dynamic_configs(per_broker=per_broker))
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    try:
        config.validate_dynamic(overrides, per_broker=per_broker)
    except ConfigError as exc:
        raise ApiError(ErrorCode.invalid_request, str(exc)) from None
    check_alter_authorized(ctx, resource)
    if not validate_only:
        await store.set_broker_configs(overrides, cluster_default=not per_broker)


async def alter_resource(ctx: RequestContext, store: MetadataStore, config: BrokerConfig,
                         resource, alteration: Alteration, validate_only: bool) -> None:
    """Applies ``alteration`` to a topic, group or broker resource, or raises its ApiError."""
    match ResourceType.of(resource.resource_type):
        case ResourceType.TOPIC:
            check_alter_authorized(ctx, resource)
            await alter_topic(store, config, resource.resource_name, alteration, validate_only)
        case ResourceType.GROUP:
            check_alter_authorized(ctx, resource)
            await alter_group(store, config, resource.resource_name, alteration, validate_only)
        case ResourceType.BROKER:
            await alter_broker(ctx, store, config, resource, alteration, validate_only)
        case _:
            raise ApiError(ErrorCode.invalid_request,
                           f"Unknown resource type {resource.resource_type}")


async def alter_each(ctx: RequestContext, request,
                     alter: Callable[..., Awaitable[None]]) -> object:
    """AlterConfigs and IncrementalAlterConfigs alike: ``alter(resource, repeated,
    validate_only)`` each resource in turn, and answer for each."""
    repeated = repeated_resources(request.resources)
    responses = [
        await answer(resource, alter(resource, repeated, request.validate_only))
        for resource in request.resources
    ]
    return ctx.respond(responses=responses)


async def answer(resource, change: Awaitable[None]) -> dict:
    """The response entry of one resource: the ApiError ``change`` raised, or none."""
    try:
        await change
    except ApiError as error:
        return resource_result(error, resource)
    return resource_result(ApiError(ErrorCode.none), resource)

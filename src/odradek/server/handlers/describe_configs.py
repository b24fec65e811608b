"""DescribeConfigs (key 32): the configs of topics, of groups, of this broker and of its
loggers.

As Kafka 3.9's ConfigHelper: ``configuration_keys`` null or empty means every key; synonyms
and documentation (v3+) only when asked for.

* TOPIC: the name must be valid and the topic must exist (UNKNOWN_TOPIC_OR_PARTITION,
  without a message);
* BROKER: "" describes the cluster-wide dynamic defaults, this broker's id every broker
  config; another id is INVALID_REQUEST;
* GROUP (KIP-848, KIP-932): every group config, the group's own value above its broker
  synonym; the group need not exist, "" is INVALID_REQUEST;
* BROKER_LOGGER (KIP-412): the broker's loggers and their effective levels; here Python's
  loggers, with log4j's names for the levels.

Each resource needs DESCRIBE_CONFIGS first, on the topic or on the cluster (see
:mod:`~odradek.server.handlers.config_resources`), else it is answered
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED with the error's message and no
configs, whether or not the topic exists (GROUP_AUTHORIZATION_FAILED for a group).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from odradek.metadata.model import InvalidTopicError, validate_topic_name
from odradek.metadata.store import MetadataStore, group_entity
from odradek.protocol.api import ApiKey
from odradek.security.acl import AclOperation
from odradek.server.config import (
    BrokerConfig,
    ConfigEntry,
    ConfigSource,
    ConfigType,
    describe_topic_config,
)
from odradek.server.group_config import describe_group_config
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.api_error import ApiError
from odradek.server.handlers.authorization import AUTHORIZATION_FAILED_MESSAGES
from odradek.server.handlers.config_resources import (
    ResourceType,
    authorization_error,
    broker_id,
)

# Python's levels under log4j's names, which are what Kafka's tools expect.
LOG4J_LEVELS = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
}
ROOT_LOGGER = "root"  # log4j's name for the root logger


@handles(ApiKey.DESCRIBE_CONFIGS)
def handle_describe_configs(ctx: RequestContext, request, metadata: MetadataStore,
                            config: BrokerConfig) -> object:
    documentation = getattr(request, "include_documentation", False)
    results = [_describe(ctx, metadata, config, resource, request.include_synonyms,
                         documentation)
               for resource in request.resources]
    return ctx.respond(results=results)


def _describe(ctx: RequestContext, store: MetadataStore, config: BrokerConfig, resource,
              synonyms: bool, documentation: bool) -> dict:
    names = resource.configuration_keys or None
    try:
        refused = authorization_error(ctx, AclOperation.DESCRIBE_CONFIGS, resource)
        if refused is not None:
            raise ApiError(refused, AUTHORIZATION_FAILED_MESSAGES[refused])
        configs = [_config(entry, synonyms, documentation)
                   for entry in _entries(store, config, resource, names)]
        error = ApiError(ErrorCode.none)
    except ApiError as exc:
        configs, error = [], exc
    return {"error_code": error.error_code, "error_message": error.message,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name,
            "configs": configs}


def _entries(store: MetadataStore, config: BrokerConfig, resource,
             names) -> list[ConfigEntry]:
    name = resource.resource_name
    node_id = config.node_id
    match ResourceType.of(resource.resource_type):
        case ResourceType.TOPIC:
            try:
                validate_topic_name(name)
            except InvalidTopicError as exc:
                raise ApiError(ErrorCode.invalid_topic_exception, str(exc)) from None
            topic = store.topic(name)
            if topic is None:
                raise ApiError(ErrorCode.unknown_topic_or_partition)
            return describe_topic_config(topic.configs, config, names)
        case ResourceType.GROUP:
            if not name:
                raise ApiError(ErrorCode.invalid_request,
                               "Default group resources are not allowed.")
            return describe_group_config(store.entity_configs().get(group_entity(name), {}),
                                         config, names)
        case ResourceType.BROKER:
            if not name:
                return config.describe(names, cluster_default=True)
            if broker_id(name, "Broker") != node_id:
                raise ApiError(ErrorCode.invalid_request,
                               f"Unexpected broker id, expected {node_id} or empty string, "
                               f"but received {name}")
            return config.describe(names)
        case ResourceType.BROKER_LOGGER:
            if not name:
                raise ApiError(ErrorCode.invalid_request, "Broker id must not be empty")
            if broker_id(name, "Broker") != node_id:
                raise ApiError(ErrorCode.invalid_request,
                               f"Unexpected broker id, expected {node_id} but received "
                               f"{name}")
            return _loggers(names)
        case other:
            raise ApiError(ErrorCode.invalid_request,
                           f"Unsupported resource type: {other.name}")


def _loggers(names) -> list[ConfigEntry]:
    loggers = {ROOT_LOGGER: logging.getLogger()}
    loggers.update((n, l) for n, l in logging.root.manager.loggerDict.items()
                   if isinstance(l, logging.Logger))
    return [
        ConfigEntry(
            name=name,
            value=_level_name(logger.getEffectiveLevel()),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            read_only=False,
            sensitive=False,
            synonyms=(),
            type=ConfigType.UNKNOWN,
            documentation=None,
        )
        for name, logger in sorted(loggers.items())
        if names is None or name in names
    ]


def _level_name(level: int) -> str:
    return LOG4J_LEVELS.get(level) or logging.getLevelName(level)


def _config(entry: ConfigEntry, synonyms: bool, documentation: bool) -> dict:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": entry.sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source}
                     for s in entry.synonyms] if synonyms else [],
        "config_type": entry.type,
        "documentation": entry.documentation if documentation else None,
    }

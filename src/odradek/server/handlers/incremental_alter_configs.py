"""IncrementalAlterConfigs (key 44, KIP-339): SET, DELETE, APPEND and SUBTRACT config keys
of a topic, a group or this broker, leaving the other overrides alone.

APPEND and SUBTRACT work on LIST configs only (``cleanup.policy``) and start from the current
override, else the config's default. Checks and error codes are those of
:mod:`odradek.server.handlers.config_resources`; a null value is allowed for DELETE only.
``validate_only`` checks and changes nothing.
"""

from __future__ import annotations

import functools

from kio.schema.errors import ErrorCode

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.server.config import (
    BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    AlterConfigOp,
    BrokerConfig,
    apply_incremental,
)
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.api_error import ApiError
from odradek.server.handlers.config_resources import (
    ResourceType,
    alter_each,
    alter_resource,
    check_entries,
    check_once,
)

OPERATIONS = frozenset(AlterConfigOp)


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_incremental_alter_configs(ctx: RequestContext, request,
                                           metadata: MetadataStore,
                                           config: BrokerConfig) -> object:
    return await alter_each(ctx, request, functools.partial(_alter, ctx, metadata, config))


async def _alter(ctx: RequestContext, store: MetadataStore, config: BrokerConfig, resource,
                 repeated, validate_only: bool) -> None:
    check_once(resource, repeated)
    check_entries([c.name for c in resource.configs],
                  [c.name for c in resource.configs
                   if c.value is None and c.config_operation != AlterConfigOp.DELETE])
    unknown = [c.config_operation for c in resource.configs
               if c.config_operation not in OPERATIONS]
    if unknown:
        raise ApiError(ErrorCode.invalid_request, f"Unknown operations type {unknown[0]}")
    ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
    defs = {ResourceType.TOPIC: TOPIC_CONFIGS, ResourceType.GROUP: GROUP_CONFIGS}.get(
        resource.resource_type, BROKER_CONFIGS)
    await alter_resource(ctx, store, config, resource,
                         lambda current: apply_incremental(current, ops, defs), validate_only)

"""AlterConfigs (key 33): replaces the whole override set of a topic or of this broker.

A key the request leaves out loses its override, which is why KIP-339 deprecated this API
for IncrementalAlterConfigs. Checks and error codes are those of
:mod:`odradek.server.handlers.config_resources`; ``validate_only`` checks and changes nothing.
"""

from __future__ import annotations

import functools

from odradek.metadata.store import MetadataStore
from odradek.protocol.api import ApiKey
from odradek.server.config import BrokerConfig
from odradek.server.handlers import RequestContext, handles
from odradek.server.handlers.config_resources import (
    alter_each,
    alter_resource,
    check_entries,
    check_once,
)


@handles(ApiKey.ALTER_CONFIGS)
async def handle_alter_configs(ctx: RequestContext, request, metadata: MetadataStore,
                               config: BrokerConfig) -> object:
    return await alter_each(ctx, request, functools.partial(_alter, ctx, metadata, config))


async def _alter(ctx: RequestContext, store: MetadataStore, config: BrokerConfig, resource,
                 repeated, validate_only: bool) -> None:
    check_once(resource, repeated)
    check_entries([c.name for c in resource.configs],
                  [c.name for c in resource.configs if c.value is None])
    overrides = {c.name: c.value for c in resource.configs}
    await alter_resource(ctx, store, config, resource, lambda _current: dict(overrides),
                         validate_only)

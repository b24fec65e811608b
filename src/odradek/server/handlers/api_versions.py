"""ApiVersions (key 18): the versions of every API this broker serves (KIP-35, KIP-511)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey, SUPPORTED_APIS, advertised_versions, response_class
from odradek.protocol.messages import build
from odradek.server.handlers import RequestContext, handles


def _api_keys() -> list[dict[str, int]]:
    return [
        {"api_key": key, "min_version": r.min_version, "max_version": r.max_version}
        for key, r in ((key, advertised_versions(key)) for key in sorted(SUPPORTED_APIS))
    ]


def unsupported_version_response():
    """The v0 answer to an ApiVersions request of a version newer than we serve."""
    return build(
        response_class(ApiKey.API_VERSIONS, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=_api_keys(),
    )


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(ctx: RequestContext, request) -> object:
    return ctx.respond(error_code=ErrorCode.none, api_keys=_api_keys())

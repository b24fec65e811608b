"""ApiVersions (key 18): the versions of every API this broker serves (KIP-35, KIP-511),
and, from v3, the features it supports and has finalized (KIP-584).

The one feature is ``transaction.version``: 2, transactions v2 (KIP-890), finalized on every
broker as Kafka 4 finalizes it. A client that speaks it (Kafka's own 4.0+) bumps its epoch
at every transaction end (EndTxn v5) and lets its writes add their partitions (Produce v12,
TxnOffsetCommit v5); clients that do not keep the first protocol, which this broker serves
with the same leader-side verification (KIP-890 part 1).
"""

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


# name -> (lowest supported, highest supported, finalized level)
FEATURES = {"transaction.version": (0, 2, 2)}
# The epoch of the finalized features (Kafka: the metadata offset they were set at); they
# never change here.
FINALIZED_FEATURES_EPOCH = 1


@handles(ApiKey.API_VERSIONS)
def handle_api_versions(ctx: RequestContext, request) -> object:
    return ctx.respond(
        error_code=ErrorCode.none, api_keys=_api_keys(),
        supported_features=[{"name": name, "min_version": low, "max_version": high}
                            for name, (low, high, _) in FEATURES.items()],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[{"name": name, "min_version_level": level,
                             "max_version_level": level}
                            for name, (_, _, level) in FEATURES.items()])

"""The API table: which Kafka APIs odradek serves, in which versions, with kio's classes.

A version range here is a promise made to every client through ApiVersions, so an entry is
added only together with its handler in ``odradek.server.handlers``. Ranges start where
Apache Kafka 4.x starts (it removed the pre-KIP-896 versions) or lower where a tool in use
still sends an old version, and stop at the newest version whose semantics are implemented.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cache

from kio.index import load_request_schema, load_response_schema


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


# api key -> versions served. Grows with the handlers; see the module docstring.
SUPPORTED_APIS: dict[ApiKey, VersionRange] = {
    ApiKey.PRODUCE: VersionRange(3, 12),
    ApiKey.FETCH: VersionRange(4, 12),
    ApiKey.LIST_OFFSETS: VersionRange(1, 7),
    ApiKey.METADATA: VersionRange(0, 12),
    ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
    ApiKey.OFFSET_FETCH: VersionRange(1, 9),
    ApiKey.FIND_COORDINATOR: VersionRange(0, 6),
    ApiKey.JOIN_GROUP: VersionRange(0, 9),
    ApiKey.HEARTBEAT: VersionRange(0, 4),
    ApiKey.LEAVE_GROUP: VersionRange(0, 5),
    ApiKey.SYNC_GROUP: VersionRange(0, 5),
    ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),
    ApiKey.LIST_GROUPS: VersionRange(0, 5),
    ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
    ApiKey.API_VERSIONS: VersionRange(0, 3),
    ApiKey.CREATE_TOPICS: VersionRange(2, 7),
    ApiKey.DELETE_TOPICS: VersionRange(1, 6),
    ApiKey.DELETE_RECORDS: VersionRange(0, 2),
    ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 4),
    ApiKey.END_TXN: VersionRange(0, 5),
    ApiKey.WRITE_TXN_MARKERS: VersionRange(1, 1),
    ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 5),
    ApiKey.DESCRIBE_ACLS: VersionRange(1, 3),
    ApiKey.CREATE_ACLS: VersionRange(1, 3),
    ApiKey.DELETE_ACLS: VersionRange(1, 3),
    ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
    ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),
    ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),
    ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
    ApiKey.DELETE_GROUPS: VersionRange(0, 2),
    ApiKey.ELECT_LEADERS: VersionRange(0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
    ApiKey.OFFSET_DELETE: VersionRange(0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 1),
    ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),
    ApiKey.LIST_TRANSACTIONS: VersionRange(0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
    ApiKey.SHARE_FETCH: VersionRange(1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 1),
    ApiKey.READ_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
}


# Versions advertised below what is served. librdkafka decides that a broker can take gzip
# and snappy batches from "Produce v0 is supported", so Kafka 4 keeps advertising Produce
# v0 while refusing v0-v2 requests (KAFKA-18659); odradek does the same: a Produce request
# older than v3 still closes the connection.
ADVERTISED_MIN_VERSIONS: dict[ApiKey, int] = {ApiKey.PRODUCE: 0}


def advertised_versions(api_key: ApiKey) -> VersionRange:
    served = SUPPORTED_APIS[api_key]
    return VersionRange(ADVERTISED_MIN_VERSIONS.get(api_key, served.min_version),
                        served.max_version)


@cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)

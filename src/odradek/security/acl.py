"""Kafka's ACL model: resource patterns, access control entries, bindings, and their filters.

An ACL (KIP-11) is an ``AclBinding``: a ``ResourcePattern`` (which resources) and an
``AccessControlEntry`` ("User:alice" may READ from host "*"). The rules, all Kafka's:

* Codes are Kafka's wire codes. A code this broker does not know reads as ``UNKNOWN``, as
  Kafka's ``fromCode`` does, so a newer client's request decodes and is refused, not crashed.
* A pattern is LITERAL (the name itself; the name "*" is every resource of the type) or
  PREFIXED (KIP-290: every resource whose name starts with it). The CLUSTER resource is
  always named "kafka-cluster". An entry's host "*" is every host; its principal "User:*"
  every principal.
* A filter (DescribeAcls, DeleteAcls) ``matches`` bindings: ANY matches every type,
  operation and permission, a ``None`` name, principal or host every one. Pattern type ANY
  matches every pattern with exactly its name; MATCH matches what would apply to a resource
  of that name: LITERAL patterns of the name or "*", PREFIXED patterns that prefix it.
* CreateAcls refuses a binding with INVALID_REQUEST (``validate_new_acl``); a filter with an
  UNKNOWN field is invalid (``validate_filter``).
* ACLs persist in ZooKeeper as Kafka's ZooKeeper-mode ``AclAuthorizer`` kept them (3.9's
  ``ZkData.scala``), one znode per resource pattern holding all its entries::

      /kafka-acl/<ResourceType>/<name>                     LITERAL patterns
      /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns

      {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                            "operation":"Read","host":"*"}]}

  Types, operations and permissions are written in Kafka's Pascal case ("Topic",
  "TransactionalId", "IdempotentWrite", "Allow"). Names are written as they are, so a name
  must be a valid znode name: no "/", not "." or "..", none of the characters ZooKeeper's
  ``PathUtils.validatePath`` refuses.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from kio.schema.errors import ErrorCode

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class _KafkaEnum(enum.IntEnum):
    """An enum of Kafka's ACL codes, with Kafka's ``fromCode`` and Pascal-case names."""

    @classmethod
    def _missing_(cls, value: object) -> Self | None:
        return cls["UNKNOWN"] if isinstance(value, int) else None

    @property
    def kafka_name(self) -> str:
        """``SecurityUtils.toPascalCase``: TRANSACTIONAL_ID is "TransactionalId"."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> Self:
        """``SecurityUtils.valueFromMap``: the Pascal-case name, or the same in any case
        ("READ", "read", "IDEMPOTENTWRITE"); anything else is UNKNOWN."""
        upper = name.upper()
        return next((member for member in cls if member.kafka_name.upper() == upper),
                    cls["UNKNOWN"])


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # KIP-939


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Which resources a binding applies to. As a request carries it: any codes, checked
    by ``validate_new_acl`` before it is created."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who ("User:alice", or "User:*") may or may not do what, from which host ("*")."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``; the defaults match every pattern."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource named `self.name`.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    @property
    def is_unknown(self) -> bool:
        return (self.resource_type == ResourceType.UNKNOWN
                or self.pattern_type == PatternType.UNKNOWN)


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's ``AccessControlEntryFilter``; the defaults match every entry."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return (self.principal in (None, entry.principal)
                and self.host in (None, entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    @property
    def is_unknown(self) -> bool:
        return (self.operation == AclOperation.UNKNOWN
                or self.permission_type == AclPermissionType.UNKNOWN)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``; ``AclBindingFilter()`` matches every binding."""

    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and \
            self.entry_filter.matches(binding.entry)


# -- what CreateAcls, DescribeAcls and DeleteAcls refuse --------------------------------


@dataclass(frozen=True, slots=True)
class AclError:
    """The error code and message answered for one ACL creation or one filter."""

    error_code: ErrorCode
    message: str


def validate_new_acl(binding: AclBinding) -> AclError | None:
    """Why CreateAcls refuses ``binding`` (INVALID_REQUEST), or ``None`` to create it.

    The checks and messages are Kafka's, in the order Kafka makes them: the codes
    (``AclControlManager.validateNewAcl``), the CLUSTER name and the empty name
    (``AclApis.handleCreateAcls``), the principal (KAFKA-18051, Kafka 4.0), then the name
    as a znode (the ZooKeeper ``AclAuthorizer`` refuses a "/"; ZooKeeper refuses the rest).
    Kafka's request parser refuses a request holding an UNKNOWN code before any of this
    (closing the connection), and a binding of ANY or MATCH fails to convert, which fails
    the whole request with UNKNOWN_SERVER_ERROR; answering INVALID_REQUEST for that one
    binding is what ``validateNewAcl`` means to answer.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return _invalid(f"Invalid permissionType {entry.permission_type.name}")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return _invalid("Invalid empty resource name")
    if ":" not in entry.principal:
        return _invalid(f"Could not parse principal from `{entry.principal}` (no colon is "
                        f"present separating the principal type from the principal name)")
    if not _is_znode_name(pattern.name):
        return _invalid("Failed to create ACL")
    return None


def validate_filter(binding_filter: AclBindingFilter) -> AclError | None:
    """Why DescribeAcls or DeleteAcls refuses a filter (``AclControlManager.validateFilter``),
    or ``None``. Kafka's request parser refuses the whole request, closing the connection."""
    if binding_filter.pattern_filter.is_unknown:
        return _invalid("Unknown patternFilter.")
    if binding_filter.entry_filter.is_unknown:
        return _invalid("Unknown entryFilter.")
    return None


def _invalid(message: str) -> AclError:
    return AclError(ErrorCode.invalid_request, message)


def _is_znode_name(name: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath`` for one node of a path. It checks Java's UTF-16
    chars, so a character beyond U+FFFF (a surrogate pair) is refused too."""
    if name in ("", ".", ".."):
        return False
    return not any(c == "/" or c <= "\x1f" or "\x7f" <= c <= "\x9f" or "\ud800" <= c <= "\uf8ff"
                   or c >= "\ufff0" for c in name)


# -- ZooKeeper ------------------------------------------------------------------------

# ZkAclStore: LiteralAclStore, and ExtendedAclStore for each other pattern type (only
# PREFIXED exists), under ExtendedAclZNode with the pattern type's name in lower case.
ACL_STORE_PATHS = {
    PatternType.LITERAL: "/kafka-acl",
    PatternType.PREFIXED: "/kafka-acl-extended/prefixed",
}


def acl_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """The znode whose children are the names of one type's patterns: /kafka-acl/Topic."""
    return f"{ACL_STORE_PATHS[pattern_type]}/{resource_type.kafka_name}"


def acl_path(pattern: ResourcePattern) -> str:
    """``ResourceZNode.path``: the znode holding one pattern's entries."""
    if not _is_znode_name(pattern.name):
        raise ValueError(f"not a znode name: {pattern.name!r}")
    return f"{acl_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def pattern_of_acl_path(path: str) -> ResourcePattern:
    """The resource pattern whose entries the znode at ``path`` holds; a type this broker
    does not know is UNKNOWN, as Kafka's loader reads it."""
    for pattern_type, store in ACL_STORE_PATHS.items():
        if path.startswith(store + "/"):
            type_name, separator, name = path.removeprefix(store + "/").partition("/")
            if separator and _is_znode_name(name):
                return ResourcePattern(ResourceType.from_kafka_name(type_name), name,
                                       pattern_type)
    raise ValueError(f"not the path of a resource pattern's ACLs: {path}")


ACLS_VERSION = 1


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """``ResourceZNode.encode``. The keys are in the order Kafka wrote them up to 3.7 (3.8's
    Java ``AclEntry`` writes them in ``HashMap`` order; readers take either). The entries are
    sorted, so equal sets are equal bytes; non-ASCII characters are UTF-8, as from Jackson."""
    ordered = sorted(entries, key=lambda e: (e.principal, e.host, e.operation,
                                             e.permission_type))
    return json.dumps({
        "version": ACLS_VERSION,
        "acls": [{"principal": e.principal,
                  "permissionType": e.permission_type.kafka_name,
                  "operation": e.operation.kafka_name,
                  "host": e.host} for e in ordered],
    }, separators=(",", ":"), ensure_ascii=False).encode()


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """``AclEntry.fromBytes``: no data is no entries; a version other than 1 is an error;
    an operation or permission name this broker does not know is UNKNOWN."""
    if not data:
        return frozenset()
    value = json.loads(data)
    if value["version"] != ACLS_VERSION:
        raise ValueError(f"unsupported ACL znode version: {value['version']}")
    return frozenset(
        AccessControlEntry(principal=item["principal"], host=item["host"],
                           operation=AclOperation.from_kafka_name(item["operation"]),
                           permission_type=AclPermissionType.from_kafka_name(
                               item["permissionType"]))
        for item in value["acls"])

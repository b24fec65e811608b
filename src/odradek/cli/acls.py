"""``odradek acls``: add, list and remove ACLs (KIP-11), as Kafka's ``kafka-acls.sh`` does.

An ACL lets (ALLOW) or forbids (DENY) a principal an operation on a resource pattern from a
host: ``User:alice`` may READ topic ``orders`` from any host (``*``). The options are
kafka-acls.sh's, and so is what they mean:

- each resource (``--topic``, ``--group``, ``--transactional-id``, ``--cluster``) gets every
  operation for every principal, ``--allow-principal`` on each ``--allow-host`` and
  ``--deny-principal`` on each ``--deny-host`` (``*`` when none is given);
- ``--operation`` defaults to All, for ``add`` and ``remove`` alike;
- ``--producer`` and ``--consumer`` stand for the operations a producer or a consumer needs
  (AclCommand's ``getProducerResourceFilterToAcls`` and ``getConsumerResourceFilterToAcls``);
- ``remove`` without a principal removes every ACL of the resources it names;
- ``--resource-pattern-type`` is LITERAL or PREFIXED (KIP-290) for ``add``; ``list`` and
  ``remove`` also take ANY (every pattern type, with exactly the name given) and MATCH (every
  pattern that applies to a resource of that name, wildcards and prefixes included).

Unlike kafka-acls.sh, ``remove`` asks no confirmation, as no odradek command does; it
prints the ACLs it removed.

``add`` and ``remove`` use librdkafka's admin client (CreateAcls, DeleteAcls); ``list``
sends DescribeAcls itself (see ``_describe_acls`` for why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Optional

import typer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from odradek.cli import output
from odradek.cli.arguments import DEFAULT_BOOTSTRAP_SERVERS, BootstrapServers, ClientProperties
from odradek.cli.broker_requests import describe_error, exchange_with_any_broker
from odradek.cli.client import ADMIN_TIMEOUTS, Kafka
from odradek.cli.errors import fail
from odradek.protocol.api import ApiKey, request_class
from odradek.protocol.messages import build
from odradek.security import acl as kafka_acl

app = typer.Typer(help="Add, list and remove ACLs.", no_args_is_help=True)

# The name of the one CLUSTER resource; librdkafka calls its type BROKER (the same code, 4).
CLUSTER_NAME = "kafka-cluster"
CLUSTER = ResourceType.BROKER
WILDCARD_HOST = "*"

# kafka-acls.sh's operation names (SecurityUtils.operationName), of the operations
# librdkafka can send.
OPERATIONS = {"".join(part.capitalize() for part in op.name.split("_")): op
              for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}

# What each resource type's ACLs may grant besides All (Kafka's
# AclEntry.supportedOperations); kafka-acls.sh refuses to add any other.
_O = AclOperation
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                         _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS},
    ResourceType.GROUP: {_O.READ, _O.DESCRIBE, _O.DELETE},
    CLUSTER: {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
              _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE},
    ResourceType.TRANSACTIONAL_ID: {_O.DESCRIBE, _O.WRITE},
}

# The pattern types an ACL has, and those a filter may name besides.
PATTERN_TYPES = {"literal": ResourcePatternType.LITERAL,
                 "prefixed": ResourcePatternType.PREFIXED}
FILTER_PATTERN_TYPES = {**PATTERN_TYPES, "any": ResourcePatternType.ANY,
                        "match": ResourcePatternType.MATCH}

Resource = tuple[ResourceType, str]
Entry = tuple[str, str, AclPermissionType]  # principal, host, permission


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """An ACL as the broker has it, in Kafka's codes, so that one librdkafka does not know
    (a USER resource, a CreateTokens operation) is shown too, by its Kafka name."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def of(cls, binding: AclBinding) -> Acl:
        return cls(binding.restype.value, binding.name, binding.resource_pattern_type.value,
                   binding.principal, binding.host, binding.operation.value,
                   binding.permission_type.value)

    def cells(self) -> list[str]:
        return [kafka_acl.ResourceType(self.resource_type).name, self.name,
                kafka_acl.PatternType(self.pattern_type).name, self.principal, self.host,
                kafka_acl.AclOperation(self.operation).name,
                kafka_acl.AclPermissionType(self.permission_type).name]


Topics = Annotated[Optional[list[str]], typer.Option(
    "--topic", metavar="TOPIC", help="A topic (repeatable); '*' is every topic.")]
Groups = Annotated[Optional[list[str]], typer.Option(
    "--group", metavar="GROUP", help="A consumer group (repeatable); '*' is every group.")]
TransactionalIds = Annotated[Optional[list[str]], typer.Option(
    "--transactional-id", metavar="ID",
    help="A transactional id (repeatable); '*' is every one.")]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster.")]
AllowPrincipals = Annotated[Optional[list[str]], typer.Option(
    "--allow-principal", metavar="TYPE:NAME",
    help="A principal allowed, e.g. User:alice; User:* is every user (repeatable).")]
DenyPrincipals = Annotated[Optional[list[str]], typer.Option(
    "--deny-principal", metavar="TYPE:NAME", help="A principal denied (repeatable).")]
AllowHosts = Annotated[Optional[list[str]], typer.Option(
    "--allow-host", metavar="HOST", show_default="*",
    help="A host the allowed principals may connect from (repeatable).")]
DenyHosts = Annotated[Optional[list[str]], typer.Option(
    "--deny-host", metavar="HOST", show_default="*",
    help="A host the denied principals are denied from (repeatable).")]
Operations = Annotated[Optional[list[str]], typer.Option(
    "--operation", metavar="OPERATION", show_default="All",
    help=f"An operation (repeatable): {', '.join(OPERATIONS)}.")]
Producer = Annotated[bool, typer.Option(
    "--producer", help="The ACLs of a producer: Write, Describe and Create on the topics, "
                       "Write and Describe on the transactional ids.")]
Idempotent = Annotated[bool, typer.Option(
    "--idempotent", help="With --producer: IdempotentWrite on the cluster as well.")]
Consumer = Annotated[bool, typer.Option(
    "--consumer", help="The ACLs of a consumer: Read and Describe on the topics, Read on "
                       "the group.")]
FilterPatternType = Annotated[str, typer.Option(
    "--resource-pattern-type", metavar="|".join(FILTER_PATTERN_TYPES),
    help="LITERAL or PREFIXED patterns; ANY for both, MATCH for every pattern that applies "
         "to the names given.")]


@app.command()
def add(
    topics: Topics = None,
    groups: Groups = None,
    transactional_ids: TransactionalIds = None,
    cluster: Cluster = False,
    resource_pattern_type: Annotated[str, typer.Option(
        "--resource-pattern-type", metavar="literal|prefixed",
        help="LITERAL: the resources named; PREFIXED: every resource whose name starts "
             "with one given.")] = "literal",
    allow_principals: AllowPrincipals = None,
    deny_principals: DenyPrincipals = None,
    allow_hosts: AllowHosts = None,
    deny_hosts: DenyHosts = None,
    operations: Operations = None,
    producer: Producer = False,
    idempotent: Idempotent = False,
    consumer: Consumer = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Add ACLs: each principal gets each operation on each resource."""
    pattern_type = _pattern_type(resource_pattern_type, PATTERN_TYPES)
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts)
    if not entries:
        fail("give --allow-principal or --deny-principal: the principals the ACLs are for")
    grants = _grants(topics, groups, transactional_ids, cluster, operations, producer,
                     idempotent, consumer, bool(deny_principals or deny_hosts))
    for (resource_type, _), granted in grants.items():
        unsupported = granted - SUPPORTED_OPERATIONS[resource_type] - {AclOperation.ALL}
        if unsupported:
            supported = sorted(SUPPORTED_OPERATIONS[resource_type] | {AclOperation.ALL},
                               key=lambda op: op.value)
            fail(f"ResourceType {_type_name(resource_type)} only supports operations "
                 f"{', '.join(_operation_name(op) for op in supported)}")
    bindings = [AclBinding(resource_type, name, pattern_type, principal, host, operation,
                           permission)
                for (resource_type, name), granted in grants.items()
                for operation in sorted(granted, key=lambda op: op.value)
                for principal, host, permission in entries]
    with Kafka(bootstrap_server, command_config) as kafka:
        added = [Acl.of(binding) for binding, _ in kafka.settle(
            kafka.admin.create_acls(bindings, **ADMIN_TIMEOUTS), _describe)]
    output.note(f"added {_acls(len(added))}")
    _show(added)


@app.command("list")
def list_acls(
    topics: Topics = None,
    groups: Groups = None,
    transactional_ids: TransactionalIds = None,
    cluster: Cluster = False,
    resource_pattern_type: FilterPatternType = "any",
    principals: Annotated[Optional[list[str]], typer.Option(
        "--principal", metavar="TYPE:NAME",
        help="Only the ACLs of this principal (repeatable).")] = None,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """List the ACLs of the resources given (every resource if none), or of principals."""
    pattern_type = _pattern_type(resource_pattern_type, FILTER_PATTERN_TYPES)
    for principal in principals or []:
        _check_principal(principal)
    resources = _resources(topics, groups, transactional_ids, cluster) or [
        (ResourceType.ANY, None)]
    filters = list(dict.fromkeys(
        AclBindingFilter(resource_type, name, pattern_type, principal, None, AclOperation.ANY,
                         AclPermissionType.ANY)
        for resource_type, name in resources for principal in principals or [None]))
    with Kafka(bootstrap_server, command_config) as kafka:
        found = {acl for binding_filter in filters for acl in _describe_acls(kafka, binding_filter)}
    if not found:
        output.note("no ACLs")
        return
    _show(found)


@app.command()
def remove(
    topics: Topics = None,
    groups: Groups = None,
    transactional_ids: TransactionalIds = None,
    cluster: Cluster = False,
    resource_pattern_type: FilterPatternType = "any",
    allow_principals: AllowPrincipals = None,
    deny_principals: DenyPrincipals = None,
    allow_hosts: AllowHosts = None,
    deny_hosts: DenyHosts = None,
    operations: Operations = None,
    producer: Producer = False,
    idempotent: Idempotent = False,
    consumer: Consumer = False,
    bootstrap_server: BootstrapServers = DEFAULT_BOOTSTRAP_SERVERS,
    command_config: ClientProperties = None,
) -> None:
    """Remove ACLs: those of the principals, operations and hosts given on each resource,
    or, without a principal, every ACL of the resources. Prints what it removed."""
    pattern_type = _pattern_type(resource_pattern_type, FILTER_PATTERN_TYPES)
    entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts)
    if (producer or consumer) and not entries:
        fail("--producer and --consumer remove the ACLs of principals: give "
             "--allow-principal or --deny-principal")
    grants = _grants(topics, groups, transactional_ids, cluster, operations, producer,
                     idempotent, consumer, bool(deny_principals or deny_hosts))
    if entries:
        filters = [AclBindingFilter(resource_type, name, pattern_type, principal, host,
                                    operation, permission)
                   for (resource_type, name), granted in grants.items()
                   for operation in sorted(granted, key=lambda op: op.value)
                   for principal, host, permission in entries]
    else:
        filters = [AclBindingFilter(resource_type, name, pattern_type, None, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
                   for resource_type, name in grants]
    with Kafka(bootstrap_server, command_config) as kafka:
        removed = {Acl.of(binding) for _, bindings in kafka.settle(
            kafka.admin.delete_acls(filters, **ADMIN_TIMEOUTS), _describe)
            for binding in bindings}
    output.note(f"removed {_acls(len(removed))}")
    if removed:
        _show(removed)


# -- the options ------------------------------------------------------------------------


def _pattern_type(name: str, allowed: dict[str, ResourcePatternType]) -> ResourcePatternType:
    pattern_type = allowed.get(name.lower())
    if pattern_type is None:
        fail(f"--resource-pattern-type is one of {', '.join(allowed)}, got {name!r}")
    return pattern_type


def _check_principal(principal: str) -> None:
    # Kafka's SecurityUtils.parseKafkaPrincipal.
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        fail(f"expected a principal as TYPE:NAME (e.g. User:alice), got {principal!r}")


def _entries(allow_principals: list[str] | None, deny_principals: list[str] | None,
             allow_hosts: list[str] | None, deny_hosts: list[str] | None) -> list[Entry]:
    """Each principal on each of its hosts, with its permission."""
    entries: list[Entry] = []
    for principals, hosts, permission, option in (
            (allow_principals, allow_hosts, AclPermissionType.ALLOW, "--allow"),
            (deny_principals, deny_hosts, AclPermissionType.DENY, "--deny")):
        if hosts and not principals:
            fail(f"{option}-host goes with {option}-principal: the principals it is for")
        for principal in principals or []:
            _check_principal(principal)
            entries += [(principal, host, permission) for host in hosts or [WILDCARD_HOST]]
    return list(dict.fromkeys(entries))


def _resources(topics: list[str] | None, groups: list[str] | None,
               transactional_ids: list[str] | None, cluster: bool) -> list[Resource]:
    resources = [(ResourceType.TOPIC, name) for name in topics or []]
    resources += [(ResourceType.GROUP, name) for name in groups or []]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in transactional_ids or []]
    resources += [(CLUSTER, CLUSTER_NAME)] if cluster else []
    return list(dict.fromkeys(resources))


def _grants(topics: list[str] | None, groups: list[str] | None,
            transactional_ids: list[str] | None, cluster: bool, operations: list[str] | None,
            producer: bool, idempotent: bool, consumer: bool, denying: bool,
            ) -> dict[Resource, set[AclOperation]]:
    """The operations on each resource: those of --producer and --consumer, or --operation
    (All when not given) on every resource named. Fails, as kafka-acls.sh does, on options
    that do not go together and when no resource is named."""
    if idempotent and not producer:
        fail("--idempotent goes with --producer")
    if producer or consumer:
        if operations:
            fail("--producer and --consumer stand for their operations: give no --operation")
        if denying:
            fail("--producer and --consumer allow: give no --deny-principal or --deny-host")
        if not topics:
            fail(f"{'--producer' if producer else '--consumer'} needs --topic")
        if consumer and not groups:
            fail("--consumer needs --group")
        if consumer and not producer and (cluster or transactional_ids):
            fail("--consumer takes no --cluster or --transactional-id")
        return _convenience_grants(topics, groups or [], transactional_ids or [], producer,
                                   idempotent, consumer)
    resources = _resources(topics, groups, transactional_ids, cluster)
    if not resources:
        fail("give at least one resource: --topic, --group, --transactional-id or --cluster")
    granted = {_operation(name) for name in operations or []} or {AclOperation.ALL}
    return {resource: granted for resource in resources}


def _convenience_grants(topics: list[str], groups: list[str], transactional_ids: list[str],
                        producer: bool, idempotent: bool, consumer: bool,
                        ) -> dict[Resource, set[AclOperation]]:
    grants: dict[Resource, set[AclOperation]] = {}

    def grant(resources: Iterable[Resource], *operations: AclOperation) -> None:
        for resource in resources:
            grants.setdefault(resource, set()).update(operations)

    topic_resources = [(ResourceType.TOPIC, name) for name in topics]
    if producer:
        grant(topic_resources, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
        grant([(ResourceType.TRANSACTIONAL_ID, name) for name in transactional_ids],
              AclOperation.WRITE, AclOperation.DESCRIBE)
        if idempotent:
            grant([(CLUSTER, CLUSTER_NAME)], AclOperation.IDEMPOTENT_WRITE)
    if consumer:
        grant(topic_resources, AclOperation.READ, AclOperation.DESCRIBE)
        grant([(ResourceType.GROUP, name) for name in groups], AclOperation.READ)
    return grants


def _operation(name: str) -> AclOperation:
    """Kafka's names in any case, with or without underscores: DescribeConfigs,
    describeconfigs, DESCRIBE_CONFIGS."""
    wanted = name.replace("_", "").upper()
    for operation_name, operation in OPERATIONS.items():
        if operation_name.upper() == wanted:
            return operation
    fail(f"unknown operation {name!r}: the operations are {', '.join(OPERATIONS)}")


def _describe_acls(kafka: Kafka, binding_filter: AclBindingFilter) -> list[Acl]:
    """The ACLs ``binding_filter`` matches, from DescribeAcls sent by the CLI itself:
    librdkafka's describe_acls drops the answer's error, so that a principal without DESCRIBE
    on the cluster would see "no ACLs" instead of CLUSTER_AUTHORIZATION_FAILED."""
    request = build(request_class(ApiKey.DESCRIBE_ACLS, 3),
                    resource_type_filter=binding_filter.restype.value,
                    resource_name_filter=binding_filter.name,
                    pattern_type_filter=binding_filter.resource_pattern_type.value,
                    principal_filter=binding_filter.principal,
                    host_filter=binding_filter.host,
                    operation=binding_filter.operation.value,
                    permission_type=binding_filter.permission_type.value)
    response = exchange_with_any_broker(kafka, request)
    if response.error_code != ErrorCode.none:
        fail(f"DescribeAcls: {describe_error(response.error_code, response.error_message)}")
    return [Acl(resource.resource_type, resource.resource_name, resource.pattern_type,
                entry.principal, entry.host, entry.operation, entry.permission_type)
            for resource in response.resources for entry in resource.acls]


# -- what is shown ------------------------------------------------------------------------


def _type_name(resource_type: ResourceType) -> str:
    return kafka_acl.ResourceType(resource_type.value).name  # Kafka's: CLUSTER, not BROKER


def _operation_name(operation: AclOperation) -> str:
    return next(name for name, op in OPERATIONS.items() if op == operation)


def _describe(acl: AclBinding | AclBindingFilter) -> str:
    """An ACL, or a filter of them, as a phrase for an error line: ``User:alice ALLOW READ
    from * on TOPIC 'orders' (LITERAL)``; what a filter leaves open is left out."""
    who = " ".join(part for part in (
        acl.principal,
        None if acl.permission_type == AclPermissionType.ANY else acl.permission_type.name,
        None if acl.operation == AclOperation.ANY else acl.operation.name,
        None if acl.host is None else f"from {acl.host}") if part) or "ACLs"
    resource = "any resource" if acl.restype == ResourceType.ANY else _type_name(acl.restype)
    if acl.name is not None:
        resource += f" {acl.name!r}"
    return f"{who} on {resource} ({acl.resource_pattern_type.name})"


def _acls(count: int) -> str:
    return f"{count} ACL" if count == 1 else f"{count} ACLs"


def _show(acls: Iterable[Acl]) -> None:
    output.table(
        ["ResourceType", "Name", "PatternType", "Principal", "Host", "Operation", "Permission"],
        (acl.cells() for acl in sorted(acls)))

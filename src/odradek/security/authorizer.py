"""``AclAuthorizer``: every ACL of the cluster in memory, and whether a request may proceed.

The decision is Kafka's (``AclAuthorizer.authorizeAction`` in ZooKeeper mode,
``StandardAuthorizerData.findResult`` in KRaft mode; both decide the same way):

1. A super user (``super.users``) may do anything.
2. The ACLs that apply to resource R of type T are the LITERAL ones on R, the LITERAL
   wildcard "*" of T, and the PREFIXED ones whose name is a prefix of R (KIP-290).
3. If no ACL applies to R at all, whoever holds it, the answer is
   ``allow.everyone.if.no.acl.found``.
4. Of those, an ACL matches the request when its principal is the client's or "User:*", and
   its host is the client's address or "*".
5. A matching DENY of the operation, or of ALL, refuses: DENY wins.
6. Otherwise a matching ALLOW of the operation, or of ALL, or of an operation that implies
   it, allows; nothing matching refuses. Only ALLOW ACLs imply: READ, WRITE, DELETE and
   ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (``AclOperation``'s
   documentation); a DENY of READ does not deny DESCRIBE.

The ACLs come from the metadata store through ``set_acls``, on every broker; nothing is
derived from them that ``set_acls`` does not update. This class is not thread-safe: the
event loop owns it.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator

from odradek.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.principal import KafkaPrincipal

# The operations an ALLOW ACL may name to allow each operation: itself, ALL, and those that
# imply it (StandardAuthorizerData's IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS).
_ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    operation: frozenset({operation, AclOperation.ALL}) for operation in AclOperation
} | {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.ALL,
                                      AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALL,
                                              AclOperation.ALTER_CONFIGS}),
}


def parse_super_users(value: str) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by ";" (a DN may hold commas), blanks ignored,
    as ``StandardAuthorizer.getConfiguredSuperUsers``. A bad entry raises ``ValueError``
    with Kafka's message."""
    return frozenset(KafkaPrincipal.parse(text.strip())
                     for text in value.split(";") if text.strip())


class AclAuthorizer:
    def __init__(self, super_users: frozenset[KafkaPrincipal] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._super_users = super_users
        self._allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # The names of each type's PREFIXED patterns, sorted, for _prefixes_of.
        self._prefixed_names: dict[ResourceType, list[str]] = {}

    def set_acls(self, pattern: ResourcePattern,
                 entries: Iterable[AccessControlEntry]) -> None:
        """Replace ``pattern``'s entries; none removes the pattern."""
        entries = frozenset(entries)
        had = pattern in self._acls
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type == PatternType.PREFIXED and had != bool(entries):
            names = self._prefixed_names.setdefault(pattern.resource_type, [])
            if entries:
                insort(names, pattern.name)
            else:
                names.remove(pattern.name)

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``binding_filter`` matches, in a stable order (DescribeAcls)."""
        return [binding for binding in self._sorted_bindings() if binding_filter.matches(binding)]

    def bindings(self) -> list[AclBinding]:
        return self.acls(AclBindingFilter())

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        """Whether ``principal``, connected from the address ``host``, may do ``operation``
        on the resource; the rules are in the module's docstring."""
        if principal in self._super_users:
            return True
        applying = list(self._applying(resource_type, resource_name))
        if not applying:
            # AclAuthorizer.isEmptyAclAndAuthorized, StandardAuthorizer's noAclRule: ACLs
            # for other principals or operations on the resource count as ACLs found.
            return self._allow_everyone_if_no_acl_found
        principals = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        allowing = _ALLOWED_BY[operation]
        allowed = False
        for entries in applying:
            for entry in entries:
                if not _matches(entry, principals, hosts):
                    continue
                if entry.permission_type == AclPermissionType.DENY:
                    if entry.operation in (operation, AclOperation.ALL):
                        return False
                elif entry.permission_type == AclPermissionType.ALLOW:
                    allowed = allowed or entry.operation in allowing
        return allowed

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str,
                                   operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type
        (KIP-679's ``authorizeByResourceType``: an idempotent producer with WRITE on some
        topic needs no IDEMPOTENT_WRITE). An ALLOW counts unless a DENY covers its whole
        pattern: the LITERAL wildcard, the same LITERAL name, or a PREFIXED pattern that
        prefixes it."""
        if principal in self._super_users:
            return True
        principals, hosts = (str(principal), WILDCARD_PRINCIPAL), (host, WILDCARD_HOST)
        allowing = _ALLOWED_BY[operation]
        allows: list[ResourcePattern] = []
        denies: set[ResourcePattern] = set()
        found = False
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            found = True
            for entry in entries:
                if not _matches(entry, principals, hosts):
                    continue
                if entry.permission_type == AclPermissionType.DENY:
                    if entry.operation in (operation, AclOperation.ALL):
                        denies.add(pattern)
                elif entry.permission_type == AclPermissionType.ALLOW:
                    if entry.operation in allowing:
                        allows.append(pattern)
        if not found:
            return self._allow_everyone_if_no_acl_found
        if ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL) in denies:
            return False
        denied_prefixes = [p.name for p in denies if p.pattern_type == PatternType.PREFIXED]
        return any(pattern not in denies
                   and not any(pattern.name.startswith(prefix) for prefix in denied_prefixes)
                   for pattern in allows)

    def _applying(self, resource_type: ResourceType,
                  resource_name: str) -> Iterator[frozenset[AccessControlEntry]]:
        """The entries of every pattern that applies to the resource."""
        for name in {resource_name, WILDCARD_RESOURCE}:
            if entries := self._acls.get(ResourcePattern(resource_type, name,
                                                         PatternType.LITERAL)):
                yield entries
        for prefix in self._prefixes_of(resource_type, resource_name):
            yield self._acls[ResourcePattern(resource_type, prefix, PatternType.PREFIXED)]

    def _prefixes_of(self, resource_type: ResourceType, resource_name: str) -> Iterator[str]:
        """The names of PREFIXED patterns that prefix ``resource_name``, longest first.

        Kafka's StandardAuthorizer walk, over the names sorted: the greatest name not after
        ``rest`` either prefixes it (yield it, then look for shorter ones) or first differs
        from it at index i, and then every name that prefixes ``rest`` also prefixes
        ``rest[:i]`` (a longer one would sort between the two). Each step is one binary
        search and shortens ``rest``; the steps are few, not one per PREFIXED pattern.
        """
        names = self._prefixed_names.get(resource_type)
        rest = resource_name
        while names and rest:
            index = bisect_right(names, rest) - 1
            if index < 0:
                return
            candidate = names[index]
            common = _common_prefix_length(candidate, rest)
            if common == len(candidate):
                yield candidate
                rest = candidate[:-1]
            else:
                rest = candidate[:common]

    def _sorted_bindings(self) -> Iterator[AclBinding]:
        for pattern in sorted(self._acls, key=lambda p: (p.resource_type, p.pattern_type,
                                                         p.name)):
            for entry in sorted(self._acls[pattern],
                                key=lambda e: (e.principal, e.host, e.operation,
                                               e.permission_type)):
                yield AclBinding(pattern, entry)


def _common_prefix_length(a: str, b: str) -> int:
    length = min(len(a), len(b))
    return next((i for i in range(length) if a[i] != b[i]), length)


def _matches(entry: AccessControlEntry, principals: tuple[str, ...], hosts: tuple[str, ...]
             ) -> bool:
    return entry.principal in principals and entry.host in hosts

"""The authorizer's decisions, as Kafka's AclAuthorizer and StandardAuthorizer make them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer, parse_super_users
from odradek.security.principal import KafkaPrincipal

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def topic(name: str, pattern_type: PatternType = LITERAL) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, pattern_type)


def acl(permission: AclPermissionType, operation: AclOperation, principal: str = "User:alice",
        host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer(acls: dict[ResourcePattern, list[AccessControlEntry]], **config) -> AclAuthorizer:
    result = AclAuthorizer(**config)
    for pattern, entries in acls.items():
        result.set_acls(pattern, entries)
    return result


def may(auth: AclAuthorizer, operation: AclOperation, name: str = "payments",
        principal: KafkaPrincipal = ALICE, host: str = HOST) -> bool:
    return auth.authorize(principal, host, operation, TOPIC, name)


# -- super users and no ACLs ----------------------------------------------------------


def test_a_super_user_may_do_anything_even_when_denied():
    auth = authorizer({topic("payments"): [acl(DENY, Op.ALL, "User:admin")]},
                      super_users=frozenset({KafkaPrincipal("User", "admin")}))
    assert auth.authorize(KafkaPrincipal("User", "admin"), HOST, Op.WRITE, TOPIC, "payments")
    assert auth.authorize(KafkaPrincipal("User", "admin"), HOST, Op.ALTER,
                          ResourceType.CLUSTER, "kafka-cluster")


def test_super_users_are_semicolon_separated_principals():
    assert parse_super_users("User:admin;User:CN=bob,O=example") == {
        KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "CN=bob,O=example")}
    assert parse_super_users(" User:admin ; ;") == {KafkaPrincipal("User", "admin")}
    assert parse_super_users("") == frozenset()


def test_a_super_user_that_is_no_principal_is_refused_with_kafkas_message():
    with pytest.raises(ValueError, match="expected a string in format "
                                         "principalType:principalName but got admin"):
        parse_super_users("User:root;admin")


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_with_no_acl_on_the_resource_allow_everyone_if_no_acl_found_decides(allow_everyone):
    auth = authorizer({topic("orders"): [acl(ALLOW, Op.READ)]},
                      allow_everyone_if_no_acl_found=allow_everyone)
    assert may(auth, Op.WRITE, "payments") is allow_everyone


def test_an_acl_for_someone_else_on_the_resource_counts_as_an_acl_found():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ, "User:bob")]},
                      allow_everyone_if_no_acl_found=True)
    assert not may(auth, Op.READ)
    assert may(auth, Op.READ, principal=BOB)


def test_a_prefixed_or_wildcard_acl_counts_as_an_acl_found():
    for pattern in (topic("pay", PREFIXED), topic("*")):
        auth = authorizer({pattern: [acl(ALLOW, Op.READ, "User:bob")]},
                          allow_everyone_if_no_acl_found=True)
        assert not may(auth, Op.READ)


# -- the decision ---------------------------------------------------------------------


def test_an_allow_acl_allows_its_operation_and_no_other():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.WRITE)]})
    assert may(auth, Op.WRITE)
    assert not may(auth, Op.READ)
    assert not may(auth, Op.WRITE, principal=BOB)


def test_deny_wins_over_allow():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ), acl(DENY, Op.READ)]})
    assert not may(auth, Op.READ)


def test_a_deny_anywhere_that_applies_wins_over_an_allow_elsewhere():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.ALL)],
                       topic("pay", PREFIXED): [acl(DENY, Op.WRITE)]})
    assert not may(auth, Op.WRITE)
    assert may(auth, Op.READ)


def test_all_allows_and_denies_every_operation():
    allow_all = authorizer({topic("payments"): [acl(ALLOW, Op.ALL)]})
    deny_all = authorizer({topic("payments"): [acl(ALLOW, Op.ALL), acl(DENY, Op.ALL)]})
    for operation in (Op.READ, Op.WRITE, Op.ALTER_CONFIGS, Op.DESCRIBE, Op.CLUSTER_ACTION):
        assert may(allow_all, operation)
        assert not may(deny_all, operation)


@pytest.mark.parametrize("granted, implied", [
    (Op.READ, Op.DESCRIBE), (Op.WRITE, Op.DESCRIBE), (Op.DELETE, Op.DESCRIBE),
    (Op.ALTER, Op.DESCRIBE), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS),
])
def test_allowing_an_operation_allows_what_it_implies(granted, implied):
    assert may(authorizer({topic("payments"): [acl(ALLOW, granted)]}), implied)


@pytest.mark.parametrize("granted, not_implied", [
    (Op.DESCRIBE, Op.READ), (Op.CREATE, Op.DESCRIBE), (Op.ALTER, Op.DESCRIBE_CONFIGS),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS), (Op.ALTER_CONFIGS, Op.DESCRIBE),
    (Op.IDEMPOTENT_WRITE, Op.WRITE),
])
def test_no_other_operation_is_implied(granted, not_implied):
    assert not may(authorizer({topic("payments"): [acl(ALLOW, granted)]}), not_implied)


def test_denying_an_operation_does_not_deny_what_it_implies():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.ALL), acl(DENY, Op.READ)]})
    assert not may(auth, Op.READ)
    assert may(auth, Op.DESCRIBE)


def test_the_wildcard_principal_is_every_user():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ, "User:*")]})
    assert may(auth, Op.READ, principal=ALICE)
    assert may(auth, Op.READ, principal=BOB)


def test_a_principal_matches_by_type_and_name():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ, "User:alice")]})
    assert not may(auth, Op.READ, principal=KafkaPrincipal("Group", "alice"))


def test_an_acl_applies_only_from_its_host_unless_it_is_the_wildcard():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ, host="10.0.0.1"),
                                           acl(ALLOW, Op.WRITE, host="*")]})
    assert may(auth, Op.READ, host="10.0.0.1")
    assert not may(auth, Op.READ, host="10.0.0.2")
    assert may(auth, Op.WRITE, host="10.0.0.2")


def test_the_literal_wildcard_resource_applies_to_every_resource_of_its_type():
    auth = authorizer({topic("*"): [acl(ALLOW, Op.READ)]})
    assert may(auth, Op.READ, "payments")
    assert may(auth, Op.READ, "orders")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "payments")


def test_a_literal_acl_applies_to_its_name_only():
    auth = authorizer({topic("pay"): [acl(ALLOW, Op.READ)]})
    assert may(auth, Op.READ, "pay")
    assert not may(auth, Op.READ, "payments")


def test_a_prefixed_acl_applies_to_the_names_it_prefixes():
    auth = authorizer({topic("pay", PREFIXED): [acl(ALLOW, Op.READ)]})
    assert may(auth, Op.READ, "pay")
    assert may(auth, Op.READ, "payments")
    assert not may(auth, Op.READ, "pa")
    assert not may(auth, Op.READ, "orders")
    assert not auth.authorize(ALICE, HOST, Op.READ, GROUP, "payments")


def test_every_prefixed_acl_that_prefixes_the_name_applies():
    auth = authorizer({topic("p", PREFIXED): [acl(ALLOW, Op.READ)],
                       topic("pay", PREFIXED): [acl(ALLOW, Op.WRITE)],
                       topic("payments.", PREFIXED): [acl(ALLOW, Op.DELETE)],
                       topic("pax", PREFIXED): [acl(ALLOW, Op.ALTER)],
                       topic("payz", PREFIXED): [acl(ALLOW, Op.CREATE)]})
    assert [may(auth, op, "payments.eu") for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER,
                                                    Op.CREATE)] == [True, True, True, False,
                                                                     False]


# -- changes and listing --------------------------------------------------------------


def test_set_acls_replaces_a_patterns_acls_and_none_removes_them():
    auth = authorizer({topic("pay", PREFIXED): [acl(ALLOW, Op.READ)]},
                      allow_everyone_if_no_acl_found=True)
    auth.set_acls(topic("pay", PREFIXED), [acl(ALLOW, Op.WRITE)])
    assert not may(auth, Op.READ)
    assert may(auth, Op.WRITE)
    auth.set_acls(topic("pay", PREFIXED), [])
    assert may(auth, Op.READ)  # no ACL left: allow.everyone.if.no.acl.found
    assert auth.bindings() == []


def test_acls_lists_the_bindings_a_filter_matches():
    auth = authorizer({topic("payments"): [acl(ALLOW, Op.READ), acl(DENY, Op.WRITE, "User:bob")],
                       topic("pay", PREFIXED): [acl(ALLOW, Op.WRITE)],
                       ResourcePattern(GROUP, "app", LITERAL): [acl(ALLOW, Op.READ)]})
    matching_payments = AclBindingFilter(ResourcePatternFilter(TOPIC, "payments",
                                                               PatternType.MATCH))
    assert auth.acls(matching_payments) == [
        AclBinding(topic("payments"), acl(ALLOW, Op.READ)),
        AclBinding(topic("payments"), acl(DENY, Op.WRITE, "User:bob")),
        AclBinding(topic("pay", PREFIXED), acl(ALLOW, Op.WRITE)),
    ]
    bob = AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:bob"))
    assert auth.acls(bob) == [AclBinding(topic("payments"), acl(DENY, Op.WRITE, "User:bob"))]
    assert len(auth.bindings()) == 4


# -- properties -----------------------------------------------------------------------

# Nested prefixes and names that diverge from them ("pax", "pb"), for the prefix walk.
NAMES = ["p", "pa", "pay", "pax", "payments", "pb", "orders", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]
OPERATIONS = [op for op in AclOperation if op > AclOperation.ANY]

patterns = st.builds(ResourcePattern, st.sampled_from([TOPIC, GROUP]), st.sampled_from(NAMES),
                     st.sampled_from([LITERAL, PREFIXED]))
entries = st.builds(AccessControlEntry, st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS),
                    st.sampled_from(OPERATIONS), st.sampled_from([ALLOW, DENY]))
acl_tables = st.dictionaries(patterns, st.lists(entries, max_size=4), max_size=8)
requests = st.tuples(st.sampled_from([ALICE, BOB]), st.sampled_from(HOSTS[:2]),
                     st.sampled_from(OPERATIONS[1:]), st.sampled_from([TOPIC, GROUP]),
                     st.sampled_from(NAMES[:-1] + ["payments.eu", "x"]))


@settings(max_examples=300)
@given(acls=acl_tables, request=requests, allow_everyone=st.booleans())
def test_a_matching_deny_always_refuses(acls, request, allow_everyone):
    principal, host, operation, resource_type, name = request
    auth = authorizer(acls, allow_everyone_if_no_acl_found=allow_everyone)
    auth.set_acls(ResourcePattern(resource_type, name[:1], PREFIXED),
                  [acl(DENY, operation, str(principal), host)])
    assert not auth.authorize(principal, host, operation, resource_type, name)


@settings(max_examples=300)
@given(acls=acl_tables, request=requests, allow_everyone=st.booleans())
def test_the_decision_is_the_one_read_off_every_binding_that_applies(acls, request,
                                                                     allow_everyone):
    # The reference: every binding a MATCH filter on the resource finds, read one by one.
    principal, host, operation, resource_type, name = request
    auth = authorizer(acls, allow_everyone_if_no_acl_found=allow_everyone)
    applying = auth.acls(AclBindingFilter(ResourcePatternFilter(resource_type, name,
                                                                PatternType.MATCH)))
    matching = [b.entry for b in applying
                if b.entry.principal in (str(principal), "User:*") and b.entry.host in (host, "*")]
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}.get(operation, set())
    if not applying:
        expected = allow_everyone
    elif any(e.permission_type == DENY and e.operation in (operation, Op.ALL) for e in matching):
        expected = False
    else:
        expected = any(e.permission_type == ALLOW and e.operation in {operation, Op.ALL, *implied}
                       for e in matching)
    assert auth.authorize(principal, host, operation, resource_type, name) is expected

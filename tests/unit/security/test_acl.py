"""Kafka's ACL model: codes, filters, what CreateAcls refuses, the ZooKeeper layout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    acl_path,
    acl_type_path,
    decode_acls,
    encode_acls,
    pattern_of_acl_path,
    validate_filter,
    validate_new_acl,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ = AclOperation.READ

ALICE_READS = AccessControlEntry("User:alice", "*", READ, ALLOW)


def binding(name: str, pattern_type: PatternType = LITERAL, resource_type=TOPIC,
            entry: AccessControlEntry = ALICE_READS) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)


# -- codes ----------------------------------------------------------------------------


@pytest.mark.parametrize("member, code", [
    (ResourceType.UNKNOWN, 0), (ResourceType.ANY, 1), (ResourceType.TOPIC, 2),
    (ResourceType.GROUP, 3), (ResourceType.CLUSTER, 4), (ResourceType.TRANSACTIONAL_ID, 5),
    (ResourceType.DELEGATION_TOKEN, 6), (ResourceType.USER, 7),
    (PatternType.UNKNOWN, 0), (PatternType.ANY, 1), (PatternType.MATCH, 2),
    (PatternType.LITERAL, 3), (PatternType.PREFIXED, 4),
    (AclOperation.UNKNOWN, 0), (AclOperation.ANY, 1), (AclOperation.ALL, 2),
    (AclOperation.READ, 3), (AclOperation.WRITE, 4), (AclOperation.CREATE, 5),
    (AclOperation.DELETE, 6), (AclOperation.ALTER, 7), (AclOperation.DESCRIBE, 8),
    (AclOperation.CLUSTER_ACTION, 9), (AclOperation.DESCRIBE_CONFIGS, 10),
    (AclOperation.ALTER_CONFIGS, 11), (AclOperation.IDEMPOTENT_WRITE, 12),
    (AclOperation.CREATE_TOKENS, 13), (AclOperation.DESCRIBE_TOKENS, 14),
    (AclOperation.TWO_PHASE_COMMIT, 15),
    (AclPermissionType.UNKNOWN, 0), (AclPermissionType.ANY, 1), (AclPermissionType.DENY, 2),
    (AclPermissionType.ALLOW, 3),
])
def test_codes_are_kafkas_wire_codes(member, code):
    assert member == code
    assert type(member)(code) is member


@pytest.mark.parametrize("enum_type", [ResourceType, PatternType, AclOperation,
                                       AclPermissionType])
def test_a_code_this_broker_does_not_know_reads_as_unknown(enum_type):
    assert enum_type(99) is enum_type["UNKNOWN"]


def test_names_are_kafkas_pascal_case():
    assert ResourceType.TRANSACTIONAL_ID.kafka_name == "TransactionalId"
    assert AclOperation.IDEMPOTENT_WRITE.kafka_name == "IdempotentWrite"
    assert AclPermissionType.ALLOW.kafka_name == "Allow"


def test_names_are_read_in_pascal_or_any_case_and_otherwise_unknown():
    assert AclOperation.from_kafka_name("DescribeConfigs") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_kafka_name("DESCRIBECONFIGS") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_kafka_name("read") is AclOperation.READ
    # SecurityUtils upper-cases the Pascal name, so the enum's own spelling is not one.
    assert AclOperation.from_kafka_name("DESCRIBE_CONFIGS") is AclOperation.UNKNOWN


# -- filters --------------------------------------------------------------------------


def test_the_default_filter_matches_every_binding():
    assert AclBindingFilter().matches(binding("payments", PREFIXED, GROUP))
    assert AclBindingFilter().matches(
        binding("kafka-cluster", resource_type=CLUSTER,
                entry=AccessControlEntry("User:bob", "10.0.0.1", AclOperation.ALTER, DENY)))


def test_a_resource_type_filter_matches_only_that_type():
    topics = ResourcePatternFilter(resource_type=TOPIC)
    assert topics.matches(ResourcePattern(TOPIC, "a", LITERAL))
    assert not topics.matches(ResourcePattern(GROUP, "a", LITERAL))


def test_pattern_type_any_matches_every_pattern_type_with_exactly_the_name():
    any_payments = ResourcePatternFilter(TOPIC, "payments", PatternType.ANY)
    assert any_payments.matches(ResourcePattern(TOPIC, "payments", LITERAL))
    assert any_payments.matches(ResourcePattern(TOPIC, "payments", PREFIXED))
    assert not any_payments.matches(ResourcePattern(TOPIC, "pay", PREFIXED))
    assert not any_payments.matches(ResourcePattern(TOPIC, "*", LITERAL))


def test_pattern_type_match_matches_the_patterns_that_apply_to_the_name():
    match = ResourcePatternFilter(TOPIC, "payments.received", MATCH)
    assert match.matches(ResourcePattern(TOPIC, "payments.received", LITERAL))
    assert match.matches(ResourcePattern(TOPIC, "*", LITERAL))
    assert match.matches(ResourcePattern(TOPIC, "payments.", PREFIXED))
    assert match.matches(ResourcePattern(TOPIC, "payments.received", PREFIXED))
    assert not match.matches(ResourcePattern(TOPIC, "payments", LITERAL))
    assert not match.matches(ResourcePattern(TOPIC, "payments.received.eu", PREFIXED))
    assert not match.matches(ResourcePattern(GROUP, "payments.", PREFIXED))


def test_a_literal_filter_on_the_wildcard_matches_only_the_wildcard_pattern():
    wildcard = ResourcePatternFilter(TOPIC, "*", LITERAL)
    assert wildcard.matches(ResourcePattern(TOPIC, "*", LITERAL))
    assert not wildcard.matches(ResourcePattern(TOPIC, "payments", LITERAL))
    assert not wildcard.matches(ResourcePattern(TOPIC, "*", PREFIXED))


def test_a_prefixed_filter_matches_only_the_prefixed_pattern_of_its_name():
    prefixed = ResourcePatternFilter(TOPIC, "pay", PREFIXED)
    assert prefixed.matches(ResourcePattern(TOPIC, "pay", PREFIXED))
    assert not prefixed.matches(ResourcePattern(TOPIC, "pay", LITERAL))
    assert not prefixed.matches(ResourcePattern(TOPIC, "pa", PREFIXED))


def test_an_entry_filter_matches_on_each_field_it_names():
    entry = AccessControlEntry("User:alice", "10.0.0.1", READ, ALLOW)
    assert AccessControlEntryFilter(principal="User:alice").matches(entry)
    assert AccessControlEntryFilter(host="10.0.0.1", operation=READ).matches(entry)
    assert AccessControlEntryFilter(permission_type=ALLOW).matches(entry)
    assert not AccessControlEntryFilter(principal="User:bob").matches(entry)
    assert not AccessControlEntryFilter(host="*").matches(entry)
    assert not AccessControlEntryFilter(operation=AclOperation.WRITE).matches(entry)
    assert not AccessControlEntryFilter(permission_type=DENY).matches(entry)


def test_a_binding_filter_needs_both_its_pattern_and_its_entry_to_match():
    bob = AccessControlEntryFilter(principal="User:bob")
    assert not AclBindingFilter(entry_filter=bob).matches(binding("payments"))
    assert AclBindingFilter(ResourcePatternFilter(TOPIC, "payments", MATCH),
                            AccessControlEntryFilter(principal="User:alice")
                            ).matches(binding("*"))


# -- what CreateAcls refuses ----------------------------------------------------------


def invalid(message: str) -> AclError:
    return AclError(ErrorCode.invalid_request, message)


@pytest.mark.parametrize("refused, message", [
    (binding("t", resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
    (binding("t", resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (binding("t", MATCH), "Invalid patternType MATCH"),
    (binding("t", PatternType.ANY), "Invalid patternType ANY"),
    (binding("t", PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (binding("t", entry=AccessControlEntry("User:a", "*", AclOperation.ANY, ALLOW)),
     "Invalid operation ANY"),
    (binding("t", entry=AccessControlEntry("User:a", "*", AclOperation.UNKNOWN, ALLOW)),
     "Invalid operation UNKNOWN"),
    (binding("t", entry=AccessControlEntry("User:a", "*", READ, AclPermissionType.ANY)),
     "Invalid permissionType ANY"),
    (binding("cluster", resource_type=CLUSTER),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (binding(""), "Invalid empty resource name"),
    (binding("t", entry=AccessControlEntry("alice", "*", READ, ALLOW)),
     ("Could not parse principal from `alice` (no colon is present separating the "
      "principal type from the principal name)")),
    (binding("a/b"), "Failed to create ACL"),
    (binding("..", resource_type=GROUP), "Failed to create ACL"),
    (binding("bell\x07"), "Failed to create ACL"),
    (binding("emoji-\N{SMILING FACE WITH SMILING EYES}"), "Failed to create ACL"),
])
def test_create_acls_refuses_a_binding_with_kafkas_invalid_request(refused, message):
    assert validate_new_acl(refused) == invalid(message)


def test_create_acls_checks_the_codes_before_the_names():
    assert validate_new_acl(binding("", MATCH)) == invalid("Invalid patternType MATCH")
    assert validate_new_acl(binding("", resource_type=CLUSTER)) == invalid(
        "The only valid name for the CLUSTER resource is kafka-cluster")


@pytest.mark.parametrize("accepted", [
    binding("payments"),
    binding("*"),
    binding("pay", PREFIXED),
    binding("*", PREFIXED),  # Kafka takes it: the names that start with a "*"
    binding("kafka-cluster", resource_type=CLUSTER,
            entry=AccessControlEntry("User:admin", "*", AclOperation.ALTER, ALLOW)),
    binding("tx-", PREFIXED, ResourceType.TRANSACTIONAL_ID),
    binding("caf\N{LATIN SMALL LETTER E WITH ACUTE}.orders"),
    binding("t", entry=AccessControlEntry("User:CN=a,O=b:c", "10.0.0.1", READ, DENY)),
])
def test_create_acls_accepts_a_well_formed_binding(accepted):
    assert validate_new_acl(accepted) is None


def test_a_filter_with_an_unknown_field_is_invalid():
    assert validate_filter(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN))) == \
        invalid("Unknown patternFilter.")
    assert validate_filter(AclBindingFilter(ResourcePatternFilter(
        pattern_type=PatternType.UNKNOWN))) == invalid("Unknown patternFilter.")
    assert validate_filter(AclBindingFilter(entry_filter=AccessControlEntryFilter(
        operation=AclOperation.UNKNOWN))) == invalid("Unknown entryFilter.")
    assert validate_filter(AclBindingFilter(entry_filter=AccessControlEntryFilter(
        permission_type=AclPermissionType.UNKNOWN))) == invalid("Unknown entryFilter.")


def test_a_filter_of_any_and_match_is_valid():
    assert validate_filter(AclBindingFilter()) is None
    assert validate_filter(AclBindingFilter(ResourcePatternFilter(TOPIC, "t", MATCH))) is None


# -- ZooKeeper ------------------------------------------------------------------------


def test_a_literal_patterns_acls_live_under_kafka_acl():
    assert acl_path(ResourcePattern(TOPIC, "payments", LITERAL)) == "/kafka-acl/Topic/payments"
    assert acl_path(ResourcePattern(CLUSTER, "kafka-cluster", LITERAL)) == \
        "/kafka-acl/Cluster/kafka-cluster"
    assert acl_type_path(LITERAL, ResourceType.TRANSACTIONAL_ID) == "/kafka-acl/TransactionalId"


def test_a_prefixed_patterns_acls_live_under_kafka_acl_extended():
    assert acl_path(ResourcePattern(GROUP, "app-", PREFIXED)) == \
        "/kafka-acl-extended/prefixed/Group/app-"
    assert pattern_of_acl_path("/kafka-acl-extended/prefixed/DelegationToken/x") == \
        ResourcePattern(ResourceType.DELEGATION_TOKEN, "x", PREFIXED)


def test_a_name_that_is_no_znode_name_has_no_path():
    with pytest.raises(ValueError):
        acl_path(ResourcePattern(TOPIC, "a/b", LITERAL))


@pytest.mark.parametrize("path", [
    "/kafka-acl/Topic", "/kafka-acl/Topic/a/b", "/kafka-acl-extended/Topic/a",
    "/kafka-acl-changes/acl_changes_0000000001", "/brokers/topics/a",
])
def test_a_path_outside_the_acl_layout_is_no_resource_pattern(path):
    with pytest.raises(ValueError):
        pattern_of_acl_path(path)


def test_a_resource_type_this_broker_does_not_know_reads_as_unknown():
    assert pattern_of_acl_path("/kafka-acl/Connector/c") == \
        ResourcePattern(ResourceType.UNKNOWN, "c", LITERAL)


# ZooKeeper's rules for a node name: no "/", no control or private-use character, nothing
# from U+FFF0 on (past U+FFFF a Java char is a surrogate), not "." or "..".
znode_names = st.text(st.characters(max_codepoint=0xFFEF, exclude_characters="/",
                                    exclude_categories=("Cc", "Cs", "Co")),
                      min_size=1).filter(lambda name: name not in (".", ".."))


@given(resource_type=st.sampled_from([t for t in ResourceType if t > ResourceType.ANY]),
       name=znode_names, pattern_type=st.sampled_from([LITERAL, PREFIXED]))
def test_a_pattern_round_trips_through_its_path(resource_type, name, pattern_type):
    pattern = ResourcePattern(resource_type, name, pattern_type)
    assert pattern_of_acl_path(acl_path(pattern)) == pattern


entries = st.builds(
    AccessControlEntry,
    principal=st.builds(lambda t, n: f"{t}:{n}", st.sampled_from(["User", "Group"]), st.text()),
    host=st.one_of(st.just("*"), st.ip_addresses().map(str)),
    operation=st.sampled_from([o for o in AclOperation if o > AclOperation.ANY]),
    permission_type=st.sampled_from([ALLOW, DENY]),
)


@given(st.frozensets(entries, max_size=8))
def test_entries_round_trip_through_the_znode_value(acls):
    assert decode_acls(encode_acls(acls)) == acls


def test_entries_are_written_as_kafka_writes_them():
    assert encode_acls([ALICE_READS]) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}')


def test_a_znode_value_written_by_kafka_reads_back():
    # `get /kafka-acl/Topic/test` on a Kafka cluster in ZooKeeper mode.
    written = (b'{"version":1,"acls":[{"principal":"User:producer","permissionType":"Allow",'
               b'"operation":"Write","host":"127.0.0.1"},{"host":"*","operation":"All",'
               b'"permissionType":"Deny","principal":"User:*"}]}')
    assert decode_acls(written) == {
        AccessControlEntry("User:producer", "127.0.0.1", AclOperation.WRITE, ALLOW),
        AccessControlEntry("User:*", "*", AclOperation.ALL, DENY),
    }


def test_an_empty_znode_holds_no_entries_and_another_version_is_refused():
    assert decode_acls(b"") == frozenset()
    with pytest.raises(ValueError):
        decode_acls(b'{"version":2,"acls":[]}')


def test_an_operation_name_this_broker_does_not_know_reads_as_unknown():
    (entry,) = decode_acls(b'{"version":1,"acls":[{"principal":"User:a","host":"*",'
                           b'"operation":"Teleport","permissionType":"ALLOW"}]}')
    assert (entry.operation, entry.permission_type) == (AclOperation.UNKNOWN, ALLOW)

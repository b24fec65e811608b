"""DescribeClientQuotas' filters and AlterClientQuotas' checks (KIP-546), over stored quotas,
with the kio requests' own parts."""

from __future__ import annotations

import pytest
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.errors import ErrorCode

from odradek.protocol.messages import build
from odradek.server.handlers.api_error import ApiError
from odradek.server.quota_admin import (
    MATCH_TYPE_ANY,
    MATCH_TYPE_DEFAULT,
    MATCH_TYPE_EXACT,
    alter_client_quotas,
    describe_client_quotas,
)
from odradek.server.quota_entity import DEFAULT, QuotaEntity

STORED = {
    QuotaEntity("alice"): {"producer_byte_rate": 1000.0},
    QuotaEntity("alice", "app"): {"consumer_byte_rate": 2000.0},
    QuotaEntity("alice", DEFAULT): {"request_percentage": 50.0},
    QuotaEntity(DEFAULT): {"producer_byte_rate": 100.0},
    QuotaEntity(DEFAULT, DEFAULT): {"consumer_byte_rate": 200.0},
    QuotaEntity(client_id="app"): {"request_percentage": 10.0},
    QuotaEntity(client_id=DEFAULT): {"controller_mutation_rate": 5.0},
}


def describe(*components: tuple[str, int, str | None], strict: bool = False) -> set:
    request = build(DescribeClientQuotasRequest, strict=strict, components=[
        {"entity_type": entity_type, "match_type": match_type, "match": match}
        for entity_type, match_type, match in components])
    return set(describe_client_quotas(STORED, request.components, request.strict))


# -- describe --------------------------------------------------------------------------------


def test_an_empty_filter_describes_every_entity():
    assert describe() == set(STORED)


def test_an_empty_strict_filter_describes_nothing():
    assert describe(strict=True) == set()


def test_an_exact_user_also_describes_its_user_and_client_id_entities():
    assert describe(("user", MATCH_TYPE_EXACT, "alice")) == {
        QuotaEntity("alice"), QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT)}


def test_an_exact_user_strict_describes_the_user_entity_only():
    assert describe(("user", MATCH_TYPE_EXACT, "alice"), strict=True) == {QuotaEntity("alice")}


def test_default_matches_the_default_entity_only():
    assert describe(("user", MATCH_TYPE_DEFAULT, None)) == {
        QuotaEntity(DEFAULT), QuotaEntity(DEFAULT, DEFAULT)}
    assert describe(("client-id", MATCH_TYPE_DEFAULT, None), strict=True) == {
        QuotaEntity(client_id=DEFAULT)}


def test_any_matches_every_entity_of_the_type_default_included():
    assert describe(("user", MATCH_TYPE_ANY, None), strict=True) == {
        QuotaEntity("alice"), QuotaEntity(DEFAULT)}
    assert describe(("client-id", MATCH_TYPE_ANY, None)) == {
        QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT),
        QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(client_id="app"),
        QuotaEntity(client_id=DEFAULT)}


def test_a_user_and_a_client_id_component_match_the_pair():
    assert describe(("user", MATCH_TYPE_EXACT, "alice"), ("client-id", MATCH_TYPE_ANY, None)
                    ) == {QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT)}
    assert describe(("user", MATCH_TYPE_DEFAULT, None), ("client-id", MATCH_TYPE_DEFAULT, None),
                    strict=True) == {QuotaEntity(DEFAULT, DEFAULT)}


def test_the_quotas_of_each_entity_are_described():
    request = build(DescribeClientQuotasRequest, strict=True, components=[
        {"entity_type": "client-id", "match_type": MATCH_TYPE_EXACT, "match": "app"}])
    assert describe_client_quotas(STORED, request.components, True) == {
        QuotaEntity(client_id="app"): {"request_percentage": 10.0}}


def test_a_filter_on_ip_describes_nothing():
    assert describe(("ip", MATCH_TYPE_ANY, None)) == set()


@pytest.mark.parametrize(("components", "error_code", "message"), [
    ([("", MATCH_TYPE_ANY, None)], ErrorCode.invalid_request, "Invalid empty entity type."),
    ([("user", MATCH_TYPE_ANY, None), ("user", MATCH_TYPE_EXACT, "alice")],
     ErrorCode.invalid_request, "Entity type user cannot appear more than once in the filter."),
    ([("group", MATCH_TYPE_ANY, None)], ErrorCode.unsupported_version,
     "Unsupported entity type group"),
    ([("user", MATCH_TYPE_EXACT, None)], ErrorCode.invalid_request,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", MATCH_TYPE_DEFAULT, "alice")], ErrorCode.invalid_request,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", MATCH_TYPE_ANY, "alice")], ErrorCode.invalid_request,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 3, None)], ErrorCode.invalid_request, "Unknown match type 3"),
    ([("ip", MATCH_TYPE_ANY, None), ("client-id", MATCH_TYPE_ANY, None)],
     ErrorCode.invalid_request, ("Invalid entity filter component combination. IP filter "
                                 "component should not be used with user or clientId filter "
                                 "component.")),
])
def test_a_malformed_filter_fails_the_request(components, error_code, message):
    with pytest.raises(ApiError) as refused:
        describe(*components)
    assert (refused.value.error_code, refused.value.message) == (error_code, message)


# -- alter -----------------------------------------------------------------------------------


def entry(entity: dict[str, str | None], *ops: tuple[str, float | None]) -> dict:
    return {"entity": [{"entity_type": entity_type, "entity_name": name}
                       for entity_type, name in entity.items()],
            "ops": [{"key": key, "value": 0.0 if value is None else value,
                     "remove": value is None} for key, value in ops]}


def alter(*entries: dict, stored=STORED):
    request = build(AlterClientQuotasRequest, validate_only=False, entries=list(entries))
    return alter_client_quotas(stored, request.entries)


def test_setting_and_removing_quotas_gives_each_changed_entitys_quotas():
    result = alter(
        entry({"user": "alice"}, ("producer_byte_rate", 5000), ("request_percentage", 25.5)),
        entry({"user": None, "client-id": None}, ("consumer_byte_rate", None)),
        entry({"user": "carol", "client-id": "app"}, ("consumer_byte_rate", 300)))
    assert [(r.entity, r.error_code, r.error_message) for r in result.results] == [
        ({"user": "alice"}, ErrorCode.none, None),
        ({"user": None, "client-id": None}, ErrorCode.none, None),
        ({"user": "carol", "client-id": "app"}, ErrorCode.none, None)]
    assert result.changed == {
        QuotaEntity("alice"): {"producer_byte_rate": 5000.0, "request_percentage": 25.5},
        QuotaEntity(DEFAULT, DEFAULT): {},
        QuotaEntity("carol", "app"): {"consumer_byte_rate": 300.0}}


def test_removing_a_quota_the_entity_does_not_have_is_no_error_and_no_change():
    result = alter(entry({"user": "alice"}, ("consumer_byte_rate", None), ("bogus", None)))
    assert result.results[0].error_code == ErrorCode.none
    assert result.changed == {}


def test_setting_a_quota_to_its_value_changes_nothing():
    assert alter(entry({"user": "alice"}, ("producer_byte_rate", 1000))).changed == {}


@pytest.mark.parametrize(("altered", "message"), [
    (entry({"user": "alice"}, ("bytes_per_second", 10)),
     "Invalid configuration key bytes_per_second"),
    (entry({"user": "alice"}, ("producer_byte_rate", 0)),
     "Quota producer_byte_rate must be greater than 0"),
    (entry({"user": "alice"}, ("request_percentage", -5)),
     "Quota request_percentage must be greater than 0"),
    (entry({"user": "alice"}, ("consumer_byte_rate", 10.5)),
     "consumer_byte_rate cannot be a fractional value."),
    (entry({"user": "alice"}, ("producer_byte_rate", 1e19)),
     "Proposed value for producer_byte_rate is too large for a LONG."),
    (entry({}, ("producer_byte_rate", 10)), "Invalid empty client quota entity"),
    (entry({"group": "g"}, ("producer_byte_rate", 10)),
     "Unhandled client quota entity type: group"),
    (entry({"user": ""}, ("producer_byte_rate", 10)), "Empty user not supported"),
    (entry({"ip": "10.0.0.7", "user": "alice"}, ("connection_creation_rate", 10)),
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    (entry({"ip": "10.0.0.7"}, ("connection_creation_rate", 10)),
     "Unhandled client quota entity type: ip"),
    (entry({"user": "alice", "client-id": "app"}, ("producer_byte_rate", 10),
           ("producer_byte_rate", 20)),
     ("Duplicate quota key producer_byte_rate not updating quota for this entity "
      "ClientQuotaEntity(entries={client-id=app, user=alice})")),
])
def test_an_invalid_alteration_is_refused_for_its_entity(altered, message):
    result = alter(altered)
    [refused] = result.results
    assert (refused.error_code, refused.error_message) == (ErrorCode.invalid_request, message)
    assert result.changed == {}


def test_a_fractional_request_percentage_is_accepted():
    assert alter(entry({"client-id": "app"}, ("request_percentage", 0.5))).changed == {
        QuotaEntity(client_id="app"): {"request_percentage": 0.5}}


def test_an_entity_altered_twice_in_one_request_is_refused_and_changes_nothing():
    result = alter(entry({"user": None}, ("producer_byte_rate", 10)),
                   entry({"client-id": "app"}, ("request_percentage", 20)),
                   entry({"user": None}, ("consumer_byte_rate", 20)))
    assert [(r.entity, r.error_code, r.error_message) for r in result.results] == [
        ({"user": None}, ErrorCode.invalid_request,
         "Ignoring duplicate entity ClientQuotaEntity(entries={user=null})"),
        ({"client-id": "app"}, ErrorCode.none, None)]
    assert result.changed == {QuotaEntity(client_id="app"): {"request_percentage": 20.0}}


def test_one_invalid_entity_does_not_fail_the_others():
    result = alter(entry({"user": "alice"}, ("producer_byte_rate", -1)),
                   entry({"user": "bob"}, ("producer_byte_rate", 10)))
    assert [r.error_code for r in result.results] == [ErrorCode.invalid_request, ErrorCode.none]
    assert result.changed == {QuotaEntity("bob"): {"producer_byte_rate": 10.0}}

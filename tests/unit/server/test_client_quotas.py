"""Client quotas (Kafka's ClientQuotaManager): which quota applies to a client, which clients
share a measurement, what each request counts, and the throttle time its response gets."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.messages import build
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.quota_entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    match_quota,
)
from odradek.server.quotas import ClientQuotas

# -- which quota applies ---------------------------------------------------------------------

# Kafka's precedence, highest first (ClientQuotaManager's doc), for user alice, client app.
LEVELS = [
    QuotaEntity("alice", "app"),  # /config/users/<user>/clients/<client-id>
    QuotaEntity("alice", DEFAULT),  # /config/users/<user>/clients/<default>
    QuotaEntity("alice"),  # /config/users/<user>
    QuotaEntity(DEFAULT, "app"),  # /config/users/<default>/clients/<client-id>
    QuotaEntity(DEFAULT, DEFAULT),  # /config/users/<default>/clients/<default>
    QuotaEntity(DEFAULT),  # /config/users/<default>
    QuotaEntity(client_id="app"),  # /config/clients/<client-id>
    QuotaEntity(client_id=DEFAULT),  # /config/clients/<default>
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_each_precedence_level_applies_over_every_level_below_it(level):
    bounds = {entity: 1000.0 + i for i, entity in enumerate(LEVELS) if i >= level}
    match = match_quota(bounds, "alice", "app")
    assert (match.entity, match.bound) == (LEVELS[level], 1000.0 + level)


def test_quotas_of_other_users_and_client_ids_do_not_apply():
    bounds = {QuotaEntity("bob", "app"): 1.0, QuotaEntity("bob"): 2.0,
              QuotaEntity(client_id="other"): 3.0, QuotaEntity(DEFAULT, "other"): 4.0}
    match = match_quota(bounds, "alice", "app")
    assert (match.entity, match.bound) == (None, math.inf)


@pytest.mark.parametrize(("entity", "sensor"), [
    (QuotaEntity("alice", "app"), ("alice", "app")),
    (QuotaEntity("alice", DEFAULT), ("alice", "app")),
    (QuotaEntity("alice"), ("alice", None)),
    (QuotaEntity(DEFAULT, "app"), ("alice", "app")),
    (QuotaEntity(DEFAULT, DEFAULT), ("alice", "app")),
    (QuotaEntity(DEFAULT), ("alice", None)),
    (QuotaEntity(client_id="app"), (None, "app")),
    (QuotaEntity(client_id=DEFAULT), (None, "app")),
])
def test_the_level_of_the_quota_decides_which_clients_are_measured_together(entity, sensor):
    assert match_quota({entity: 1.0}, "alice", "app").sensor == sensor


def test_an_entity_names_a_user_a_client_id_or_both():
    with pytest.raises(ValueError, match="Invalid empty client quota entity"):
        QuotaEntity()


def test_default_is_not_a_user_called_default():
    assert QuotaEntity("<default>") != QuotaEntity(DEFAULT)
    assert QuotaEntity(DEFAULT, "app").entries() == {"client-id": "app", "user": None}
    assert QuotaEntity.from_entries({"user": None, "client-id": "app"}) == QuotaEntity(DEFAULT,
                                                                                       "app")


# -- the throttle time of a response ---------------------------------------------------------


ALICE = KafkaPrincipal("User", "alice")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Request:
    """The parts of a RequestContext the quotas read."""

    api_key: ApiKey
    body: Any
    principal: KafkaPrincipal = ALICE
    client_id: str | None = "app"
    size_in_bytes: int = 0
    received_at: float = 0.0
    api_local_complete_at: float | None = None

    @property
    def request(self) -> SimpleNamespace:
        return SimpleNamespace(body=self.body)


def produce(clock: Clock, size: int, *, acks: int = 1, took: float = 0.0, **who) -> Request:
    return Request(ApiKey.PRODUCE, SimpleNamespace(acks=acks), size_in_bytes=size,
                   received_at=clock.now - took, **who)


def fetch(clock: Clock, *, replica_id: int = -1, took: float = 0.0, **who) -> Request:
    return Request(ApiKey.FETCH, SimpleNamespace(replica_id=replica_id),
                   received_at=clock.now - took, **who)


def fetched(*sizes: int) -> Any:
    """A Fetch v12 response with partitions holding ``sizes`` bytes of records."""
    return build(response_class(ApiKey.FETCH, 12), throttle_time=0, error_code=0,
                 session_id=0, responses=[{"topic": "page-views", "partitions": [
                     {"partition_index": index, "error_code": 0, "high_watermark": 0,
                      "last_stable_offset": 0, "log_start_offset": 0,
                      "aborted_transactions": None, "preferred_read_replica": -1,
                      "records": b"r" * size}
                     for index, size in enumerate(sizes)]}])


def metadata(clock: Clock, *, took: float, **who) -> Request:
    return Request(ApiKey.METADATA, SimpleNamespace(), received_at=clock.now - took, **who)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def quotas(clock) -> ClientQuotas:
    return ClientQuotas(clock=clock)


def test_without_quotas_a_response_costs_not_even_a_clock_reading():
    def clock() -> float:
        raise AssertionError("the clock was read")

    quotas = ClientQuotas(clock=clock)
    assert quotas.throttle_time_ms(produce(Clock(), 10**9), None) == 0


def test_a_producer_within_its_byte_rate_is_not_throttled(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 1000})
    for _ in range(10):
        assert quotas.throttle_time_ms(produce(clock, 1000), None) == 0
        clock.now += 1


def test_a_producer_over_its_byte_rate_waits_until_its_average_is_back_at_the_bound(
        quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 1000})
    for _ in range(10):
        quotas.throttle_time_ms(produce(clock, 1000), None)
        clock.now += 1
    # 11,000 bytes over the 10 s measured: 1,100 B/s, so (1,100 - 1,000) / 1,000 * 10 s.
    assert quotas.throttle_time_ms(produce(clock, 1000), None) == 1000


def test_a_throttled_request_still_counts(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 2000), None) == 10_000  # 200 B/s over 10 s
    assert quotas.throttle_time_ms(produce(clock, 1000), None) == 20_000  # 300 B/s


def test_a_bandwidth_throttle_time_is_not_capped(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 10})
    # 100,000 bytes over 10 s against 10 B/s: (10,000 - 10) / 10 * 10 s.
    assert quotas.throttle_time_ms(produce(clock, 100_000), None) == 9_990_000


def test_an_acks_0_produce_counts_its_bytes(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 2000, acks=0), None) == 10_000


def test_an_acks_0_produce_is_exempt_from_the_request_quota(quotas, clock):
    quotas.update(QuotaEntity("alice"), {REQUEST_PERCENTAGE: 1})
    assert quotas.throttle_time_ms(produce(clock, 10, acks=0, took=5.0), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 10, acks=1, took=5.0), None) == 1000


def test_a_quota_at_user_level_is_shared_by_all_the_users_client_ids(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id="app-1"), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id="app-2"), None) == 10_000


def test_each_user_has_its_own_share_of_the_default_user_quota(quotas, clock):
    quotas.update(QuotaEntity(DEFAULT), {PRODUCER_BYTE_RATE: 100})
    bob = KafkaPrincipal("User", "bob")
    assert quotas.throttle_time_ms(produce(clock, 1000), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, principal=bob), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, principal=bob), None) == 10_000


def test_a_client_id_quota_is_shared_by_every_user_sending_that_client_id(quotas, clock):
    quotas.update(QuotaEntity(client_id="app"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1000, principal=ANONYMOUS), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000), None) == 10_000


def test_a_default_client_id_quota_of_a_user_is_measured_per_client_id(quotas, clock):
    quotas.update(QuotaEntity("alice", DEFAULT), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id="app-1"), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id="app-2"), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id="app-2"), None) == 10_000


def test_a_client_without_a_client_id_is_measured_as_the_empty_client_id(quotas, clock):
    quotas.update(QuotaEntity(client_id=""), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id=None), None) == 0
    assert quotas.throttle_time_ms(produce(clock, 1000, client_id=""), None) == 10_000


def test_a_consumer_fetch_counts_the_records_it_returns(quotas, clock):
    quotas.update(QuotaEntity("alice"), {CONSUMER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(fetch(clock), fetched(400, 600)) == 0
    assert quotas.throttle_time_ms(fetch(clock), fetched(1000)) == 10_000


def test_a_fetch_counts_against_the_consumer_byte_rate_not_the_producer_byte_rate(
        quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(fetch(clock), fetched(100_000)) == 0


def test_a_follower_fetch_counts_against_no_client_quota(quotas, clock):
    quotas.update(QuotaEntity(DEFAULT), {CONSUMER_BYTE_RATE: 1, REQUEST_PERCENTAGE: 1})
    follower = fetch(clock, replica_id=2, took=5.0)
    assert quotas.throttle_time_ms(follower, fetched(100_000)) == 0
    assert quotas.throttle_time_ms(fetch(clock), fetched(1)) == 0


def test_request_percentage_counts_the_time_until_the_response_is_ready(quotas, clock):
    quotas.update(QuotaEntity("alice"), {REQUEST_PERCENTAGE: 10})
    # 21 requests of 50 ms: 105 % of a second over 10 s is 10.5 %, over a bound of 10 %.
    for _ in range(20):
        assert quotas.throttle_time_ms(metadata(clock, took=0.05), None) == 0
    assert quotas.throttle_time_ms(metadata(clock, took=0.05), None) == 500


def test_a_delayed_response_counts_the_time_its_handler_took_not_its_wait(quotas, clock):
    quotas.update(QuotaEntity("alice"), {REQUEST_PERCENTAGE: 1})
    long_poll = fetch(clock, took=0.5)
    long_poll.api_local_complete_at = long_poll.received_at + 0.001
    assert quotas.throttle_time_ms(long_poll, fetched(0)) == 0


def test_a_request_quota_throttle_time_is_capped_at_one_window(quotas, clock):
    quotas.update(QuotaEntity("alice"), {REQUEST_PERCENTAGE: 1})
    # 5 s of broker time over 10 s is 50 %: (50 - 1) / 1 * 10 s, capped to 1 s.
    assert quotas.throttle_time_ms(metadata(clock, took=5.0), None) == 1000


def test_cluster_actions_are_exempt_from_the_request_quota(quotas, clock):
    quotas.update(QuotaEntity(DEFAULT), {REQUEST_PERCENTAGE: 1})
    markers = Request(ApiKey.WRITE_TXN_MARKERS, SimpleNamespace(), received_at=clock.now - 5)
    assert quotas.throttle_time_ms(markers, None) == 0


def test_the_throttle_time_is_the_larger_of_the_bandwidth_and_request_quotas(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100, REQUEST_PERCENTAGE: 1})
    assert quotas.throttle_time_ms(produce(clock, 1500, took=0.5), None) == 5000
    clock.now += 3600
    assert quotas.throttle_time_ms(produce(clock, 1, took=5.0), None) == 1000


def test_an_update_applies_to_the_measurement_already_running(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1500), None) == 5000
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 150})
    # The 1,500 bytes already recorded still count: 1,600 bytes over 10 s against 150 B/s.
    assert quotas.throttle_time_ms(produce(clock, 100), None) == 667


def test_a_quota_at_a_higher_level_takes_over_when_it_is_set(quotas, clock):
    quotas.update(QuotaEntity(client_id=DEFAULT), {PRODUCER_BYTE_RATE: 1_000_000})
    assert quotas.throttle_time_ms(produce(clock, 1000), None) == 0
    quotas.update(QuotaEntity("alice", "app"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 1500), None) == 5000


def test_removing_a_quota_stops_throttling(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 2000), None) > 0
    quotas.update(QuotaEntity("alice"), {})
    assert quotas.throttle_time_ms(produce(clock, 2000), None) == 0
    assert quotas.entities == {}


def test_removing_a_quota_leaves_a_lower_level_in_force(quotas, clock):
    quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: 1_000_000})
    quotas.update(QuotaEntity(DEFAULT), {PRODUCER_BYTE_RATE: 100})
    assert quotas.throttle_time_ms(produce(clock, 2000), None) == 0
    quotas.update(QuotaEntity("alice"), {})
    # Both user levels measure alice alone, on one measurement: 4,000 bytes over 10 s.
    assert quotas.throttle_time_ms(produce(clock, 2000), None) == 30_000


def test_an_update_sets_all_of_an_entitys_quotas_and_keeps_only_quotas(quotas):
    entity = QuotaEntity("alice")
    quotas.update(entity, {PRODUCER_BYTE_RATE: 100, CONSUMER_BYTE_RATE: 200})
    quotas.update(entity, {CONTROLLER_MUTATION_RATE: 5, "SCRAM-SHA-256": "salt=..."})
    assert quotas.entities == {entity: {CONTROLLER_MUTATION_RATE: 5.0}}


def test_controller_mutation_rate_is_stored_but_not_enforced(quotas, clock):
    quotas.update(QuotaEntity(DEFAULT), {CONTROLLER_MUTATION_RATE: 0.001})
    assert quotas.throttle_time_ms(metadata(clock, took=5.0), None) == 0


@pytest.mark.parametrize("value", [0, -1, math.nan])
def test_a_quota_not_greater_than_0_is_refused(quotas, value):
    with pytest.raises(ValueError, match="Quota producer_byte_rate must be greater than 0"):
        quotas.update(QuotaEntity("alice"), {PRODUCER_BYTE_RATE: value})
    assert quotas.entities == {}

"""``ClientQuotas``: the delay a response asks its client to hold back (``throttle_time``).

Kafka throttles a client over its quotas, set per user principal and/or client id (KIP-55,
see ``quota_entity`` for which quota applies): bandwidth quotas on the bytes it produces and
fetches (KIP-13) and request quotas on the share of a broker thread its requests take
(KIP-124). Every response that has a ``throttle_time`` field takes it from
:meth:`ClientQuotas.throttle`, through ``RequestContext.respond``; the client waits that
long before its next request, and the connection stops reading it meanwhile (KIP-219). A
throttled consumer's fetch is answered without its records, as Kafka answers it, so a
consumer cannot run ahead of its quota by the size of one response.

What is counted, as Kafka's ``KafkaApis`` counts it, each against its own measurement
(``quota_rate``), recorded first and checked after, so a throttled client's bytes count:

* ``producer_byte_rate``: the size of a Produce request on the wire, also with acks=0.
* ``consumer_byte_rate``: the record data of a consumer's Fetch response. Kafka counts the
  whole response; the fixed fields around the records (tens of bytes a partition) are left
  out here so that no response is encoded twice. A follower's fetch (``replica_id`` >= 0) is
  replication, not a client: it counts against no client quota.
* ``request_percentage``: the time from when the broker began handling the request until
  its response was ready or its handler parked it to wait (a long poll, an acks=-1
  produce, a JoinGroup), whichever came first, as a percentage of one thread's time
  (``ClientRequestQuotaManager``: a 10 ms request is 1 % of a second); the wait does not
  count, as in Kafka. Handlers written as coroutines (the admin APIs that write to the
  metadata store) count until their response. Exempt, as in Kafka: follower fetches, acks=0
  produces and cluster actions (WriteTxnMarkers).

A response's throttle time is the largest of the throttle times of the quotas it counts
against (``KafkaApis`` takes the max of the bandwidth and the request quota). A request quota's
throttle time is capped at one window (``quota.window.size.seconds``); a bandwidth quota's is
not. With no quota of a kind configured, that kind is not even recorded, and with none at
all a response costs one attribute test.

Quotas change at run time through :meth:`ClientQuotas.update`, which the metadata store calls
on every broker: the next record on a running measurement uses the new bound. Measurements
idle for an hour are dropped, as Kafka expires its quota sensors.

This class is not thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from odradek.protocol.api import ApiKey
from odradek.security.principal import KafkaPrincipal
from odradek.server.quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_CONFIG_TYPES,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaMatch,
    match_quota,
)
from odradek.server.quota_rate import Rate, throttle_time_ms

# QuotaConfig's defaults for quota.window.num and quota.window.size.seconds: ten whole windows
# and the current one, of one second each.
QUOTA_WINDOW_NUM_DEFAULT = 11
QUOTA_WINDOW_SIZE_SECONDS_DEFAULT = 1

# Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds, checked as often as Kafka's
# Metrics checks it (every 30 s).
INACTIVE_SENSOR_EXPIRATION_SECONDS = 3600
SENSOR_EXPIRATION_CHECK_SECONDS = 30

# The quotas this broker enforces; controller_mutation_rate is stored only.
ENFORCED_QUOTAS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

# KIP-124: requests of Kafka's ClusterAction APIs are exempt from request quotas. (Today
# WriteTxnMarkers' responses have no throttle_time, so RequestContext.respond never asks.)
CLUSTER_ACTIONS = frozenset({ApiKey.WRITE_TXN_MARKERS})


class QuotaRequest(Protocol):
    """What the quotas read of a request's context (``RequestContext``)."""

    @property
    def principal(self) -> KafkaPrincipal: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def api_key(self) -> ApiKey: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def request(self) -> Any: ...  # its ``body`` is the kio request
    # Monotonic seconds, on the quotas' clock, when the dispatcher began handling the
    # request (Kafka's requestDequeueTimeNanos) and when its handler's work ended and it began
    # to wait, None while it works (apiLocalCompleteTimeNanos).
    @property
    def received_at(self) -> float: ...
    @property
    def api_local_complete_at(self) -> float | None: ...


class ClientQuotas:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 quota_window_num: int = QUOTA_WINDOW_NUM_DEFAULT,
                 quota_window_size_seconds: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT) -> None:
        """``clock`` gives monotonic seconds, the clock of ``received_at``."""
        self._clock = clock
        self._window_num = quota_window_num
        self._window_ms = quota_window_size_seconds * 1000
        self._entities: dict[QuotaEntity, Mapping[str, float]] = {}
        # Each enforced quota by entity; a kind is recorded only while it has one.
        self._bounds: dict[str, dict[QuotaEntity, float]] = {key: {} for key in ENFORCED_QUOTAS}
        self._enforcing = False
        # (user, client id) -> the match of each enforced quota; cleared when quotas change.
        self._matches: dict[tuple[str, str], dict[str, QuotaMatch]] = {}
        # (quota, user, client id), grouped as QuotaMatch.sensor says -> its measurement.
        self._sensors: dict[tuple[str, str | None, str | None], Rate] = {}
        self._next_expiration_check_ms = 0.0

    @property
    def entities(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        """Every entity's quotas, what DescribeClientQuotas describes."""
        return MappingProxyType(self._entities)

    def update(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        """Sets all of ``entity``'s quotas; an empty mapping removes them. Keys that are not
        quotas (Kafka keeps SCRAM credentials in the same ZooKeeper node) are ignored."""
        kept = {key: float(value) for key, value in quotas.items() if key in QUOTA_CONFIG_TYPES}
        for key, value in kept.items():
            if not value > 0:
                raise ValueError(f"Quota {key} must be greater than 0")
        if kept:
            self._entities[entity] = MappingProxyType(kept)
        else:
            self._entities.pop(entity, None)
        for key, bounds in self._bounds.items():
            if key in kept:
                bounds[entity] = kept[key]
            else:
                bounds.pop(entity, None)
                if not bounds:
                    self._sensors = {sensor: rate for sensor, rate in self._sensors.items()
                                     if sensor[0] != key}
        self._enforcing = any(self._bounds.values())
        self._matches.clear()

    def throttle(self, ctx: QuotaRequest, response: Any) -> tuple[int, Any]:
        """The throttle time of ``response`` and the response to send: the same one, or a
        throttled fetch's without its records (``withheld``)."""
        throttle_ms, withhold = self._throttle(ctx, response)
        return throttle_ms, self.withheld(response) if withhold else response

    def throttle_time_ms(self, ctx: QuotaRequest, response: Any) -> int:
        return self._throttle(ctx, response)[0]

    def _throttle(self, ctx: QuotaRequest, response: Any) -> tuple[int, bool]:
        """The throttle time of ``response`` (built unthrottled, in the request's version, or
        None for a request answered with nothing, an acks=0 produce) to the request of
        ``ctx``: its principal and client id pick the quotas, the request's size, the
        response's records and the time taken are what they count."""
        if not self._enforcing:
            return 0, False
        api_key = ctx.api_key
        body = ctx.request.body
        if api_key in CLUSTER_ACTIONS or (api_key == ApiKey.FETCH and replica_id(body) >= 0):
            return 0, False  # a follower's fetch counts against replication quotas only
        now = self._clock()
        now_ms = now * 1000
        matches = self._match(ctx.principal.name, ctx.client_id or "", now_ms)
        bandwidth_ms = 0
        if api_key == ApiKey.PRODUCE:
            bandwidth_ms = self._record(matches, PRODUCER_BYTE_RATE, ctx.size_in_bytes, now_ms)
            if body.acks == 0:
                return bandwidth_ms, False  # KafkaApis: no request quota if acks=0
        elif api_key == ApiKey.FETCH:
            fetched = records_size(response)
            bandwidth_ms = self._record(matches, CONSUMER_BYTE_RATE, fetched, now_ms)
        request_ms = 0
        if REQUEST_PERCENTAGE in matches:
            completed_at = ctx.api_local_complete_at
            request_time = (now if completed_at is None else completed_at) - ctx.received_at
            # ClientRequestQuotaManager: a second of thread time is 100 % (nanosToPercentage),
            # and a throttle time is capped at one window (maxThrottleTimeMs).
            request_ms = min(
                self._record(matches, REQUEST_PERCENTAGE, max(request_time, 0.0) * 100, now_ms),
                self._window_ms)
        throttle_ms = max(bandwidth_ms, request_ms)
        withhold = bool(throttle_ms) and api_key == ApiKey.FETCH and self.withholds(matches,
                                                                                   fetched)
        if withhold:
            # KafkaApis: a throttled fetch is answered without its records, which then do
            # not count; the consumer fetches them again once the throttle time is over.
            self._record(matches, CONSUMER_BYTE_RATE, -fetched, now_ms)
        return throttle_ms, withhold

    def withholds(self, matches: dict[str, QuotaMatch], fetched: int) -> bool:
        """Whether a throttled fetch's records are withheld. Kafka caps a consumer's fetch
        at what its quota allows in a window (``getMaxValueInQuotaWindow``) so that any
        response can be sent once the client is under its quota; a response larger than
        that is sent here (and throttled after) rather than withheld for ever."""
        match = matches.get(CONSUMER_BYTE_RATE)
        window_bytes = (match.bound * (self._window_num - 1) * self._window_ms / 1000
                        if match else 0)
        return fetched <= window_bytes

    @staticmethod
    def withheld(response: Any) -> Any:
        """A throttled fetch's answer: no records, as Kafka's ``getThrottledResponse``."""
        return dataclasses.replace(response, responses=())

    def _match(self, user: str, client_id: str, now_ms: float) -> dict[str, QuotaMatch]:
        if now_ms >= self._next_expiration_check_ms:
            self._expire_sensors(now_ms)
        matches = self._matches.get((user, client_id))
        if matches is None:
            matches = {key: match_quota(bounds, user, client_id)
                       for key, bounds in self._bounds.items() if bounds}
            self._matches[(user, client_id)] = matches
        return matches

    def _record(self, matches: dict[str, QuotaMatch], key: str, value: float,
                now_ms: float) -> int:
        match = matches.get(key)
        if match is None:
            return 0
        sensor = (key, *match.sensor)
        rate = self._sensors.get(sensor)
        if rate is None:
            rate = self._sensors[sensor] = Rate(self._window_num, self._window_ms)
        rate.record(value, now_ms)
        return throttle_time_ms(rate, match.bound, now_ms)

    def _expire_sensors(self, now_ms: float) -> None:
        expired_before = now_ms - INACTIVE_SENSOR_EXPIRATION_SECONDS * 1000
        self._sensors = {sensor: rate for sensor, rate in self._sensors.items()
                         if rate.last_record_ms >= expired_before}
        # The matches of clients gone quiet go too; the others are found again at once.
        self._matches.clear()
        self._next_expiration_check_ms = now_ms + SENSOR_EXPIRATION_CHECK_SECONDS * 1000


def replica_id(fetch_request: Any) -> int:
    """Who sent a Fetch: a broker id for a follower, negative for a consumer (in
    ``replica_state`` from v15, KIP-903)."""
    state = getattr(fetch_request, "replica_state", None)
    return fetch_request.replica_id if state is None else state.replica_id


def records_size(fetch_response: Any) -> int:
    """The bytes of record data a Fetch response carries, without encoding it."""
    return sum(len(partition.records) for topic in fetch_response.responses
               for partition in topic.partitions if partition.records is not None)

"""Demo data for the pipelines: endless streams of records, one generator per scenario.

Generators do no I/O and read no clock or global randomness: the caller passes a seeded
``random.Random`` and ``now_ms`` (the event time to stamp, in milliseconds since the epoch),
so a test gets the same records on every run and can compute the pipelines' answers itself.
``odradek demo produce`` paces them onto a topic.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Clock = Callable[[], int]

# Few enough users that the same user comes back within a one-minute window at demo rates,
# so "distinct users per window" differs from "views per window".
USERS = 40
PAGES = ("/", "/products", "/products/kettle", "/products/toaster", "/cart", "/checkout",
         "/search", "/about")
REFERRERS = ("", "https://search.example/", "https://social.example/", "/")
ACCOUNTS = 25


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes


def _json(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def page_views(rng: random.Random, now_ms: Clock) -> Iterator[Record]:
    """Page views keyed by user id (seed: "Logging User Web Activity"); a few pages draw
    most of the traffic."""
    weights = [1 / (rank + 1) for rank in range(len(PAGES))]
    while True:
        user_id = f"user-{rng.randrange(USERS)}"
        [page] = rng.choices(PAGES, weights)
        yield Record(user_id.encode(), _json({
            "user_id": user_id, "page": page, "ts": now_ms(), "referrer": rng.choice(REFERRERS),
        }))


def payments(rng: random.Random, now_ms: Clock) -> Iterator[Record]:
    """Payments keyed by account id, each with the fraud model's ``fraudProbability``.

    ``random() ** 3`` puts most payments near 0; about 7% are above the 0.8 of the
    ``fraudulent_payments`` example.
    """
    for number in itertools.count(1):
        account_id = f"acct-{rng.randrange(ACCOUNTS):03d}"
        yield Record(account_id.encode(), _json({
            "payment_id": f"pay-{number:08d}", "account_id": account_id,
            "amount": round(rng.uniform(1, 500), 2),
            "fraudProbability": round(rng.random() ** 3, 3), "ts": now_ms(),
        }))


def events(rng: random.Random, now_ms: Clock) -> Iterator[Record]:
    """Numbered events without keys, for reservoir sampling: every value is distinct."""
    for event_id in itertools.count():
        yield Record(None, _json({"event_id": event_id, "ts": now_ms()}))


@dataclass(frozen=True)
class Scenario:
    name: str
    topic: str
    records: Callable[[random.Random, Clock], Iterator[Record]]
    summary: str


SCENARIOS = {scenario.name: scenario for scenario in (
    Scenario("website-activity", "page-views", page_views,
             "page views keyed by user id"),
    Scenario("payments", "payments", payments,
             "payments keyed by account id, with a fraudProbability"),
    Scenario("events", "events", events, "numbered events"),
)}

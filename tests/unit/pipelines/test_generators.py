"""The demo generators: the records each scenario makes, and how ``demo produce`` paces them."""

from __future__ import annotations

import itertools
import json
import random

from odradek.cli.demo import paced
from odradek.pipelines.generators import PAGES, SCENARIOS, events, page_views, payments

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def take(generator, count: int, seed: int = 7, step_ms: int = 250) -> list:
    clock = itertools.count(START_MS, step_ms).__next__
    return list(itertools.islice(generator(random.Random(seed), clock), count))


def test_the_same_seed_and_clock_make_the_same_records_for_every_scenario():
    for scenario in SCENARIOS.values():
        assert take(scenario.records, 50) == take(scenario.records, 50)


def test_page_views_are_keyed_by_user_and_stamped_with_the_clock():
    views = take(page_views, 200)
    for number, record in enumerate(views):
        view = json.loads(record.value)
        assert record.key == view["user_id"].encode()
        assert view["page"] in PAGES
        assert view["ts"] == START_MS + 250 * number
    users = {record.key for record in views}
    assert 1 < len(users) < len(views), "users come back, so distinct users < views"


def test_payments_have_distinct_ids_account_keys_and_a_probability_between_0_and_1():
    records = take(payments, 500)
    values = [json.loads(record.value) for record in records]
    assert len({value["payment_id"] for value in values}) == 500
    assert all(record.key == value["account_id"].encode()
               for record, value in zip(records, values))
    probabilities = [value["fraudProbability"] for value in values]
    assert all(0 <= p <= 1 for p in probabilities)
    flagged = sum(p > 0.8 for p in probabilities)
    assert 10 < flagged < 80, "a few percent are above the fraud filter's 0.8"
    assert all(value["amount"] > 0 for value in values)


def test_events_are_numbered_from_zero_without_keys():
    records = take(events, 5)
    assert [record.key for record in records] == [None] * 5
    assert [json.loads(record.value)["event_id"] for record in records] == [0, 1, 2, 3, 4]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_paced_items_are_due_at_n_over_rate_seconds_from_the_first():
    clock = FakeClock()
    times = [clock() for _ in paced(range(5), rate=4, clock=clock, sleep=clock.sleep)]
    assert times == [100.0, 100.25, 100.5, 100.75, 101.0]


def test_paced_does_not_slow_down_for_time_the_caller_spent():
    clock = FakeClock()
    times = []
    for _ in paced(range(4), rate=2, clock=clock, sleep=clock.sleep):
        times.append(clock())
        clock.now += 0.3  # the caller's own work between items
    assert times == [100.0, 100.5, 101.0, 101.5]


def test_paced_sleeps_again_when_woken_early():
    clock = FakeClock()

    def restless_sleep(seconds: float) -> None:
        clock.now += min(seconds, 0.1)

    times = [clock() for _ in paced(range(3), rate=2, clock=clock, sleep=restless_sleep)]
    assert [round(t, 6) for t in times] == [100.0, 100.5, 101.0]

"""``odradek perf``'s arithmetic: Kafka's report lines, window by window and in total, its
percentiles, and the throttle that holds a producer to --throughput."""

from __future__ import annotations

import pytest

from odradek.cli.perf import MB, ProduceStats, Throttle, consume_line, percentiles


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_window_line_is_printed_each_interval_and_the_total_has_kafkas_format():
    clock, lines = Clock(), []
    stats = ProduceStats(4, reporting_interval_ms=1000, clock=clock, emit=lines.append)
    for latency_ms in (1.0, 3.0):
        clock.now += 0.25
        stats.record(latency_ms, MB // 2)
    assert lines == []  # half an interval
    clock.now += 0.5
    stats.record(8.0, MB // 2)
    assert lines == ["3 records sent, 3.0 records/sec (1.50 MB/sec), 4.0 ms avg latency, "
                     "8.0 ms max latency."]
    clock.now += 1.0
    stats.record(4.0, MB // 2)
    assert len(lines) == 2 and lines[1].startswith("1 records sent, 1.0 records/sec")
    assert stats.total() == ("4 records sent, 2.000000 records/sec (1.00 MB/sec), 4.00 ms avg "
                             "latency, 8.00 ms max latency, 4 ms 50th, 8 ms 95th, 8 ms 99th, "
                             "8 ms 99.9th.")


def test_latencies_are_sampled_as_kafka_samples_them_past_half_a_million_records():
    stats = ProduceStats(2_000_000, reporting_interval_ms=5000, clock=Clock(),
                         emit=lambda line: None)
    for i in range(10):
        stats.record(float(i), 100)
    assert stats.samples == [0.0, 4.0, 8.0]  # every fourth
    assert (stats.count, stats.max_ms) == (10, 9.0)  # counts and maxima see every record


@pytest.mark.parametrize(("samples", "expected"), [
    ([], [0, 0, 0, 0]),
    ([float(i) for i in range(1000)], [500, 950, 990, 999]),
    ([0.4, 0.7, 2.9], [0, 2, 2, 2]),  # whole milliseconds, as Kafka prints them
])
def test_percentiles(samples, expected):
    assert percentiles(samples, (0.5, 0.95, 0.99, 0.999)) == expected


class Polls:
    def __init__(self, clock: Clock) -> None:
        self.clock, self.waits = clock, []

    def poll(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += seconds


def test_the_throttle_waits_only_when_the_sender_is_ahead_of_its_rate():
    clock = Clock()
    producer = Polls(clock)
    throttle = Throttle(100.0, clock=clock)
    throttle.wait(1, producer)  # 1 record at t=0: 10 ms ahead
    assert producer.waits == [pytest.approx(0.01)]
    clock.now += 0.5  # far behind: 50 records' worth of time for 2 records
    throttle.wait(2, producer)
    assert len(producer.waits) == 1
    Throttle(-1, clock=clock).wait(10**9, producer)  # no limit
    assert len(producer.waits) == 1


def test_a_consume_line_splits_the_join_from_the_fetching():
    line = consume_line("start, end", elapsed_s=3.0, consumed_bytes=3 * MB, records=3000,
                        rebalance_s=1.0)
    assert line == ("start, end, 3.0000, 1.0000, 3000, 1000.0000, 1000, 2000, 1.5000, "
                    "1500.0000")

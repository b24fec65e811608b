"""Kafka's Rate over 11 samples of 1 s, and QuotaUtils' throttle time, with an injected
clock (times in milliseconds)."""

from __future__ import annotations

import pytest

from odradek.server.quota_rate import Rate, throttle_time_ms


def rate() -> Rate:
    return Rate(samples=11, window_ms=1000)


def test_a_first_burst_is_spread_over_ten_whole_windows():
    measured = rate()
    measured.record(1000, now_ms=0)
    assert measured.window_size_ms(0) == 10_000
    assert measured.measure(0) == 100.0


def test_the_rate_is_the_sum_over_the_samples_by_the_time_since_the_oldest_began():
    measured = rate()
    measured.record(100, now_ms=0)
    measured.record(100, now_ms=900)  # the same sample, begun at t=0
    for second in range(1, 12):
        measured.record(100, now_ms=second * 1000)
    # At t=11.5 s the sample begun at t=0 still overlaps the last 11 s (its last record
    # was at 0.9 s), so it counts whole, over the 11.5 s since it began.
    assert measured.window_size_ms(11_500) == 11_500
    assert measured.measure(11_500) == pytest.approx(1300 / 11.5)


def test_a_sample_with_no_record_for_all_the_windows_stops_counting():
    measured = rate()
    measured.record(5000, now_ms=0)
    assert measured.measure(10_999) == pytest.approx(5000 / 10.999)
    assert measured.measure(11_000) == 0.0


def test_within_the_bound_there_is_no_throttle_time():
    measured = rate()
    measured.record(1000, now_ms=0)
    assert throttle_time_ms(measured, bound=100, now_ms=0) == 0


def test_the_throttle_time_brings_the_average_back_to_the_bound():
    """QuotaUtils.throttleTime: X = (O - T) / T * W."""
    measured = rate()
    for second in range(11):
        measured.record(1000, now_ms=second * 1000)
    # O = 11,000 bytes / 10 s = 1,100 B/s over T = 1,000 B/s: X = 0.1 * 10,000 ms.
    assert measured.measure(10_000) == 1100
    assert throttle_time_ms(measured, bound=1000, now_ms=10_000) == 1000
    assert measured.measure(11_000) == 1000


def test_the_throttle_time_of_a_first_burst_is_measured_over_the_ten_windows():
    measured = rate()
    measured.record(2000, now_ms=0)
    # 2,000 bytes over 10 s is 200 B/s, twice the bound: (200 - 100) / 100 * 10,000 ms.
    assert throttle_time_ms(measured, bound=100, now_ms=0) == 10_000


def test_the_throttle_time_is_rounded_half_up_as_java_rounds():
    measured = Rate(samples=2, window_ms=1000)
    measured.record(1002.5, now_ms=0)
    # (1,002.5 - 1,000) / 1,000 * 1,000 ms = 2.5 ms: Math.round gives 3, not 2.
    assert throttle_time_ms(measured, bound=1000, now_ms=0) == 3

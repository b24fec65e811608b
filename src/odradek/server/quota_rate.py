"""Kafka's ``Rate`` over a windowed sum, and the throttle time of a client over its quota.

A quota is measured the way Kafka's client metrics measure it: a ``Rate`` whose ``SampledStat``
sums what was recorded in ``quota.window.num`` samples of ``quota.window.size.seconds``
each (11 of 1 s by default: ten whole windows and the current one). The rules, all Kafka's:

* A record goes into the current sample; once the sample is a window old, the next record
  starts a new sample, recycling the oldest. One extra sample is kept: the one that started
  before the measured span but overlaps it.
* A sample whose last record is ``samples * window`` old is obsolete and reset before a
  measure, so an idle client's old bytes stop counting.
* The rate is the sum over the samples divided by the elapsed time since the oldest sample
  started, but never less than ``samples - 1`` whole windows: a first burst is spread over
  ten seconds rather than measured against the few milliseconds it took (and never less than
  1 ms).
* A client is over its quota when the rate is above the bound. Its throttle time is what
  ``QuotaUtils.throttleTime`` computes: if ``O`` is the observed rate, ``T`` the bound and
  ``W`` the window of the measure, waiting ``X`` with nothing recorded brings the average
  back to the bound when ``O * W / (W + X) = T``, so ``X = (O - T) / T * W``, rounded as
  Java's ``Math.round``.

Example, 11 samples of 1 s and a bound of 1,000 B/s: a producer that sent 1,000 bytes at
every second from 0 to 10 has 11,000 bytes over a 10 s window at t=10 s, a rate of 1,100
B/s, and is throttled (1,100 - 1,000) / 1,000 * 10,000 ms = 1,000 ms; at t=11 s the sample of
t=0 is obsolete and the rate is 10,000 bytes / 10 s, the bound.

Times are milliseconds as floats (the clock's seconds * 1000). This class is not
thread-safe: the broker's event loop owns it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: float
    last_event_ms: float
    value: float = 0.0

    def reset(self, now_ms: float) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class Rate:
    """The per-second rate of what is recorded, over ``samples`` windows of ``window_ms``."""

    def __init__(self, samples: int, window_ms: float) -> None:
        self._num_samples = samples
        self._window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0
        self.last_record_ms = -math.inf  # for the expiry of idle sensors

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms
        self.last_record_ms = now_ms

    def measure(self, now_ms: float) -> float:
        """The rate per second at ``now_ms``."""
        self._purge_obsolete_samples(now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000)

    def window_size_ms(self, now_ms: float) -> float:
        """The span the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge_obsolete_samples(now_ms)
        elapsed_ms = now_ms - self._oldest(now_ms).start_ms
        full_windows = int(elapsed_ms // self._window_ms)
        min_full_windows = self._num_samples - 1
        if full_windows < min_full_windows:
            elapsed_ms += (min_full_windows - full_windows) * self._window_ms
        return max(elapsed_ms, 1.0)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        # One sample beyond the configured number: the one overlapping the measured span.
        self._current = (self._current + 1) % (self._num_samples + 1)
        if self._current == len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _oldest(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _purge_obsolete_samples(self, now_ms: float) -> None:
        expire_age_ms = self._num_samples * self._window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age_ms:
                sample.reset(now_ms)


def throttle_time_ms(rate: Rate, bound: float, now_ms: float) -> int:
    """``QuotaUtils.throttleTime``: how long the client must wait, recording nothing, for
    ``rate`` to come back to ``bound``; 0 when it is within it."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    return math.floor((observed - bound) / bound * rate.window_size_ms(now_ms) + 0.5)

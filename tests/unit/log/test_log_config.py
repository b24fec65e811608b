"""LogConfig: Kafka's topic-level defaults and their bounds."""

from __future__ import annotations

import pytest

from odradek.log import LogConfig


def test_the_defaults_are_kafkas():
    config = LogConfig()
    assert (config.segment_bytes, config.segment_ms) == (1024**3, 7 * 24 * 3600 * 1000)
    assert (config.segment_index_bytes, config.index_interval_bytes) == (10 * 1024**2, 4096)
    assert (config.retention_ms, config.retention_bytes) == (7 * 24 * 3600 * 1000, -1)
    assert config.message_timestamp_type == "CreateTime" and not config.log_append_time
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.cleanup_policy == "delete"


@pytest.mark.parametrize(
    "overrides",
    [
        {"segment_bytes": 13},
        {"segment_bytes": 2**31},
        {"segment_index_bytes": 8},
        {"index_interval_bytes": -1},
        {"flush_messages": 0},
        {"message_timestamp_type": "BrokerTime"},
        {"cleanup_policy": "forever"},
    ],
)
def test_values_kafka_would_refuse_are_refused(overrides):
    with pytest.raises(ValueError):
        LogConfig(**overrides)

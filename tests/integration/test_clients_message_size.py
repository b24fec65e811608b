"""max.message.bytes: a record just under the topic's limit is accepted, one beyond it is
refused by the broker with MESSAGE_TOO_LARGE, which every client reports as its own error."""

from __future__ import annotations

import pytest

# Lowered from the 1048588 default to keep the test fast. Every client's own limit
# (librdkafka message.max.bytes 1000000, kafka-python/aiokafka max_request_size 1048576) is
# far above, so only the broker can refuse BEYOND_LIMIT: the control topic below shows it.
MAX_MESSAGE_BYTES = 100_000
# A batch of one record adds ~80 bytes of batch header and record framing to the value.
NEAR_LIMIT = MAX_MESSAGE_BYTES - 200
BEYOND_LIMIT = MAX_MESSAGE_BYTES + 1_000


def test_record_near_max_message_bytes_is_accepted_and_one_beyond_is_refused(
        client, bootstrap, create_topic):
    topic = create_topic("limited", max_message_bytes=MAX_MESSAGE_BYTES)
    unlimited = create_topic("unlimited")
    near = {"key": b"near", "value": b"n" * NEAR_LIMIT}
    beyond = {"key": b"beyond", "value": b"b" * BEYOND_LIMIT}
    after = {"key": b"after", "value": b"a"}

    client.produce(bootstrap, topic, [near])
    with pytest.raises(Exception) as refused:
        client.produce(bootstrap, topic, [beyond])
    client.produce(bootstrap, topic, [after])
    client.produce(bootstrap, unlimited, [beyond])

    assert client.is_message_too_large(refused.value), repr(refused.value)
    consumed = client.consume(bootstrap, topic, 2)
    assert [(m.offset, m.as_sent()) for m in consumed] == [(0, near), (1, after)]
    [control] = client.consume(bootstrap, unlimited, 1)
    assert control.as_sent() == beyond

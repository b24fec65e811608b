"""Every codec of every client: batches are stored as the producer compressed them, and
consumers decompress them back to the records sent."""

from __future__ import annotations

import pytest

from odradek.protocol.records import CompressionType

CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_are_stored_as_sent_and_consumed_back(
        client, codec, bootstrap, create_topic, stored_compression_types):
    if reason := client.codec_skip_reason(codec):
        pytest.skip(reason)
    topic = create_topic(f"compressed-{codec}")
    records = [{"key": f"key-{i % 7}".encode(), "value": f"value {i} ".encode() * 20,
                "headers": [("codec", codec.encode())]} for i in range(200)]

    client.produce(bootstrap, topic, records, compression=codec)
    consumed = client.consume(bootstrap, topic, len(records))

    assert [m.as_sent() for m in consumed] == records
    assert stored_compression_types(topic) == {CompressionType[codec.upper()]}

"""One response description builds every version's kio class."""

import datetime

import pytest
from kio.schema.errors import ErrorCode

from odradek.protocol.api import ApiKey, response_class
from odradek.protocol.messages import build, has_field, millis

PARTITION = {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time": -1,
             "log_start_offset": 0, "record_errors": (), "error_message": None}


@pytest.mark.parametrize("version", range(3, 10))
def test_a_produce_response_builds_in_every_version(version):
    response = build(response_class(ApiKey.PRODUCE, version), throttle_time=0,
                     responses=[{"name": "t", "partition_responses": [PARTITION]}])
    partition = response.responses[0].partition_responses[0]
    assert partition.base_offset == 5
    assert partition.error_code is ErrorCode.none
    assert has_field(type(partition), "log_start_offset") == (version >= 5)


def test_time_fields_are_coerced_from_milliseconds():
    cls = response_class(ApiKey.PRODUCE, 9)
    response = build(cls, throttle_time=250, responses=[
        {"name": "t", "partition_responses": [dict(PARTITION, log_append_time=1_700_000_000_123)]}])
    assert response.throttle_time == datetime.timedelta(milliseconds=250)
    stamped = response.responses[0].partition_responses[0].log_append_time
    assert millis(stamped) == 1_700_000_000_123


def test_a_missing_required_field_is_a_programming_error():
    with pytest.raises(TypeError):
        build(response_class(ApiKey.PRODUCE, 9), throttle_time=0)


def test_a_nested_entity_is_taken_as_it_is_and_anything_else_is_refused():
    cls = response_class(ApiKey.PRODUCE, 9)
    built = build(cls, throttle_time=0,
                  responses=[{"name": "t", "partition_responses": [PARTITION]}])
    topic = built.responses[0]
    assert build(cls, throttle_time=0, responses=[topic]).responses[0] is topic
    with pytest.raises(TypeError, match="needs a dict"):
        build(cls, throttle_time=0, responses=[("t", [])])


def test_a_built_entity_is_the_one_its_constructor_makes_defaults_included():
    cls = response_class(ApiKey.FETCH, 12)
    described = {"partition_index": 2, "error_code": 0, "high_watermark": 7,
                 "aborted_transactions": None, "records": b""}
    built = build(cls, throttle_time=0, error_code=0, session_id=0,
                  responses=[{"topic": "t", "partitions": [described]}])
    partition = built.responses[0].partitions[0]
    made = type(partition)(partition_index=2, error_code=ErrorCode.none, high_watermark=7,
                           aborted_transactions=None, records=b"")
    assert partition == made
    assert partition.last_stable_offset == -1 and partition.preferred_read_replica == -1
    assert partition.diverging_epoch is made.diverging_epoch  # the field's default itself

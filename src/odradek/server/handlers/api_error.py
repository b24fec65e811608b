"""``ApiError``: the error code and message answered for one entry of an admin response.

Kafka's admin paths throw an ``ApiException`` per topic or resource and turn it into an
``ApiError(error, message)`` for that entry only, so one bad topic never fails the others
in its request. The admin handlers here raise and catch this the same way. Not a handler
module: it registers nothing.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class ApiError(Exception):
    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def completion_error(timeout_ms: int) -> ErrorCode:
    """The error of a topic change that was made, given the request's timeout.

    Kafka (ZkAdminManager) answers REQUEST_TIMED_OUT for every topic created, deleted or
    given partitions by a request with timeout <= 0, although the change is made: the client
    asked not to wait for it. librdkafka hides the error when its operation_timeout is 0.
    """
    return ErrorCode.request_timed_out if timeout_ms <= 0 else ErrorCode.none


# Partitions one request may add to one topic. Kafka's KRaft controller bounds the records of
# one operation the same way (10,000) and refuses more as an excessively large batch; without
# a bound, a single CreateTopics for 2^31 partitions would have the broker create them all.
MAX_NEW_PARTITIONS = 10_000


def check_new_partitions(count: int) -> None:
    if count > MAX_NEW_PARTITIONS:
        raise ApiError(ErrorCode.policy_violation,
                       f"Unable to perform excessively large batch operation: {count} new "
                       f"partitions, at most {MAX_NEW_PARTITIONS} in one request.")

"""The cluster checker's own verdicts, on logs made up here: a value written twice under
one producer epoch is a duplicate the broker let through; twice under two epochs, the
client sent it again after bumping its epoch."""

from __future__ import annotations

from checker import CheckResult, ReplicaLog, check_partition

PRODUCER = 4000


def replica(*entries: tuple[bytes, int]) -> ReplicaLog:
    """A replica holding ``(value, producer epoch)`` at offsets 0, 1, 2 ..."""
    log = ReplicaLog(node_id=1)
    for offset, (value, epoch) in enumerate(entries):
        log.values.append((offset, value))
        log.producers[offset] = (PRODUCER, epoch)
        log.origins[offset] = f"batch {offset}..{offset} of producer {PRODUCER} epoch {epoch}"
    return log


def check(log: ReplicaLog, acknowledged: set[bytes]) -> CheckResult:
    result = CheckResult()
    check_partition([log], high_watermark=len(log.values), acknowledged=acknowledged,
                    attempted=acknowledged, result=result)
    return result


def test_a_value_twice_in_one_producer_epoch_is_a_duplicate():
    result = check(replica((b"a", 0), (b"b", 0), (b"a", 0)), {b"a", b"b"})

    assert result.duplicated == [b"a"]
    assert result.resent_after_epoch_bump == []
    assert not result.ok
    assert "at 0" in result.duplicate_origins[0] and "at 2" in result.duplicate_origins[1]


def test_a_value_again_under_a_new_producer_epoch_is_a_resend_not_a_duplicate():
    result = check(replica((b"a", 0), (b"b", 0), (b"a", 1), (b"c", 1)), {b"a", b"b", b"c"})

    assert result.duplicated == []
    assert result.resent_after_epoch_bump == [b"a"]
    assert result.ok


def test_values_above_the_high_watermark_are_not_counted():
    log = replica((b"a", 0), (b"a", 0))
    result = CheckResult()
    check_partition([log], high_watermark=1, acknowledged={b"a"}, attempted={b"a"},
                    result=result)

    assert result.duplicated == [] and result.ok

"""The share coordinator: share-partition states in an in-memory ``__share_group_state``,
written, read, deleted, and loaded again as a new leader (or a restarted broker) would."""

from __future__ import annotations

import itertools
import uuid

import pytest
from group_harness import MemoryStore
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.state_records import (
    RecordState,
    RecordType,
    ShareSnapshot,
    ShareState,
    ShareStateKey,
    ShareUpdate,
    StateBatch,
    combine,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    encode_update,
    partition_for,
)

E = ErrorCode
PARTITIONS = 3
TOPIC = uuid.UUID(int=7)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def keys_in(partition: int, count: int = 1, group: str = "g") -> list[ShareStateKey]:
    """``count`` keys of ``group`` (on TOPIC) kept in ``partition`` of the state topic."""
    keys = (ShareStateKey(group, TOPIC, p) for p in itertools.count())
    return list(itertools.islice(
        (k for k in keys if partition_for(k, PARTITIONS) == partition), count))


K0, K0B = keys_in(0, 2)
[K1] = keys_in(1)
[K2] = keys_in(2)


def state(start_offset: int, *batches: tuple[int, int, RecordState, int],
          state_epoch: int = 1) -> ShareState:
    return ShareState(state_epoch, start_offset,
                      tuple(StateBatch(*b) for b in batches))


def coordinator(store: MemoryStore) -> ShareCoordinator:
    """A coordinator of every partition of ``store`` (a broker starting up)."""
    share = ShareCoordinator(store, lambda: 0)
    share.startup()
    return share


def write(share: ShareCoordinator, key: ShareStateKey, value: ShareState,
          leader_epoch: int = 0) -> list[ErrorCode]:
    """The list receives the write's outcome when the coordinator gives it."""
    outcome: list[ErrorCode] = []
    share.write(key, value, leader_epoch, outcome.append)
    return outcome


def delete(share: ShareCoordinator, *keys: ShareStateKey) -> list[ErrorCode]:
    outcome: list[ErrorCode] = []
    share.delete(keys, outcome.append)
    return outcome


def snapshots(store: MemoryStore, partition: int) -> list[tuple[ShareStateKey, object]]:
    """The partition's records, decoded: (key, ShareSnapshot) or (key, None), a tombstone."""
    decoded = []
    for key_bytes, value in store.logs[partition]:
        record_type, key = decode_key(key_bytes)
        assert record_type is RecordType.SNAPSHOT
        decoded.append((key, None if value is None else decode_value(record_type, value)))
    return decoded


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(PARTITIONS)


@pytest.fixture
def share(store) -> ShareCoordinator:
    return coordinator(store)


def test_the_keys_are_where_the_tests_expect_them():
    assert [partition_for(k, PARTITIONS) for k in (K0, K0B, K1, K2)] == [0, 0, 1, 2]
    assert len({K0, K0B, K1, K2}) == 4


# -- writing and reading ---------------------------------------------------------------


def test_a_written_state_is_read_back(share, store):
    written = state(10, (10, 14, ACKNOWLEDGED, 1), (15, 15, AVAILABLE, 2),
                    (17, 20, ARCHIVED, 5), state_epoch=3)

    assert write(share, K1, written, leader_epoch=4) == [E.none]

    assert share.read(K1) == (E.none, written)
    assert snapshots(store, 1) == [(K1, ShareSnapshot(0, 4, written))]
    assert store.logs[0] == store.logs[2] == []


def test_a_state_never_written_reads_as_none(share):
    write(share, K0, state(5))
    assert share.read(K0B) == (E.none, None)
    assert share.read(ShareStateKey("other", TOPIC, K0.partition)) == (E.none, None)


def test_a_later_write_replaces_the_state(share):
    write(share, K0, state(0, (0, 9, AVAILABLE, 1)))
    later = state(4, (6, 6, ACKNOWLEDGED, 1))
    assert write(share, K0, later) == [E.none]
    assert share.read(K0) == (E.none, later)


def test_snapshot_epochs_increase_with_each_write(share, store):
    for start in range(4):
        write(share, K2, state(start), leader_epoch=start + 10)
    write(share, K0, state(0))

    assert [(s.snapshot_epoch, s.leader_epoch) for _, s in snapshots(store, 2)] == [
        (0, 10), (1, 11), (2, 12), (3, 13)]
    assert share.states[K2].snapshot_epoch == 3
    assert share.states[K0].snapshot_epoch == 0  # each key counts its own


def test_the_snapshot_epoch_continues_after_a_restart_and_wraps_as_a_uint16(store):
    store.logs[1].append((encode_key(RecordType.SNAPSHOT, K1),
                          encode_snapshot(ShareSnapshot(65_534, 2, state(3)))))
    share = coordinator(store)

    write(share, K1, state(4), leader_epoch=2)
    write(share, K1, state(5), leader_epoch=2)

    assert [s.snapshot_epoch for _, s in snapshots(store, 1)] == [65_534, 65_535, 0]
    assert coordinator(store).states[K1] == ShareSnapshot(0, 2, state(5))


# -- not the coordinator ---------------------------------------------------------------


def test_a_key_of_a_partition_not_loaded_here_is_not_coordinator(store):
    share = ShareCoordinator(store, lambda: 0)
    share.on_elected(1)

    assert not share.is_coordinator_for(K0)
    assert share.read(K0) == (E.not_coordinator, None)
    assert write(share, K0, state(0)) == [E.not_coordinator]
    assert delete(share, K1, K0) == [E.not_coordinator]
    assert store.records() == []  # nothing written, not even K1's tombstone

    assert share.is_coordinator_for(K1)
    assert write(share, K1, state(0)) == [E.none]
    assert share.read(K1) == (E.none, state(0))


def test_without_the_state_topic_every_key_is_not_coordinator():
    class NoTopic(MemoryStore):
        def partition_count(self) -> None:
            return None

    store = NoTopic(PARTITIONS)
    share = coordinator(store)

    assert share.partition_for(K0) is None
    assert share.read(K0) == (E.not_coordinator, None)
    assert write(share, K0, state(0)) == [E.not_coordinator]
    assert store.records() == []


# -- loading ---------------------------------------------------------------------------


def test_a_restart_reads_back_the_last_snapshot_of_each_key(share, store):
    write(share, K0, state(0, (0, 3, AVAILABLE, 1)))
    write(share, K1, state(7))
    write(share, K0, state(2, (2, 3, ACKNOWLEDGED, 1)), leader_epoch=5)
    write(share, K0B, state(9))

    again = coordinator(store)

    assert again.read(K0) == (E.none, state(2, (2, 3, ACKNOWLEDGED, 1)))
    assert again.read(K0B) == (E.none, state(9))
    assert again.read(K1) == (E.none, state(7))
    assert again.read(K2) == (E.none, None)
    assert again.states == share.states
    assert again.states[K0] == ShareSnapshot(1, 5, state(2, (2, 3, ACKNOWLEDGED, 1)))


def test_update_records_after_a_snapshot_are_combined_on_load(share, store):
    write(share, K0, state(0, (0, 4, AVAILABLE, 1)), leader_epoch=1)
    write(share, K0B, state(50))
    base = share.states[K0]
    updates = [ShareUpdate(0, -1, -1, (StateBatch(0, 1, ACKNOWLEDGED, 1),)),
               ShareUpdate(0, 2, 1, (StateBatch(3, 6, AVAILABLE, 2),)),
               ShareUpdate(0, -1, 2, ())]
    for update in updates:  # as Kafka writes them, between snapshots
        store.logs[0].append((encode_key(RecordType.UPDATE, K0), encode_update(update)))

    again = coordinator(store)

    expected = combine(base, updates)
    assert expected == ShareSnapshot(0, 2, state(2, (2, 2, AVAILABLE, 1),
                                                 (3, 6, AVAILABLE, 2)))
    assert again.states[K0] == expected
    assert again.read(K0) == (E.none, expected.state)
    assert again.read(K0B) == (E.none, state(50))  # another key's state is its own
    write(again, K0, state(8), leader_epoch=2)
    assert again.states[K0] == ShareSnapshot(1, 2, state(8))


def test_a_write_from_an_older_leader_epoch_is_fenced(share):
    write(share, K0, state(0), leader_epoch=3)
    assert write(share, K0, state(5), leader_epoch=2) == [E.fenced_leader_epoch]
    assert share.read(K0) == (E.none, state(0))  # the older leader changed nothing
    assert write(share, K0, state(5), leader_epoch=-1) == [E.none]  # an admin's reset


def test_a_snapshot_after_updates_replaces_them(store):
    share = coordinator(store)
    write(share, K2, state(0, (0, 4, AVAILABLE, 1)))
    store.logs[2].append((encode_key(RecordType.UPDATE, K2),
                          encode_update(ShareUpdate(0, -1, 3, ()))))
    write(share, K2, state(1, (1, 1, ARCHIVED, 4)))

    assert coordinator(store).read(K2) == (E.none, state(1, (1, 1, ARCHIVED, 4)))


def test_a_record_that_cannot_be_read_is_skipped_on_load(store):
    share = coordinator(store)
    write(share, K0, state(3))
    store.logs[0].append((b"\x00\x07garbage", b"\x00\x00"))
    store.logs[0].append((encode_key(RecordType.SNAPSHOT, K0), b"\x00\x00\xff"))

    assert coordinator(store).read(K0) == (E.none, state(3))


# -- deleting --------------------------------------------------------------------------


def test_deleted_keys_are_gone_and_stay_gone_after_a_restart(share, store):
    write(share, K0, state(1))
    write(share, K0B, state(2))
    write(share, K1, state(3))

    assert delete(share, K0, K1) == [E.none]

    assert share.read(K0) == (E.none, None)
    assert share.read(K1) == (E.none, None)
    assert share.read(K0B) == (E.none, state(2))
    assert snapshots(store, 0)[-1] == (K0, None)  # a tombstone in each partition
    assert snapshots(store, 1)[-1] == (K1, None)
    again = coordinator(store)
    assert again.states == {K0B: ShareSnapshot(0, 0, state(2))}


def test_a_key_written_again_after_its_deletion_starts_over(share, store):
    write(share, K1, state(1))
    write(share, K1, state(2))
    delete(share, K1)
    write(share, K1, state(5))

    assert share.states[K1] == ShareSnapshot(0, 0, state(5))
    assert coordinator(store).states[K1] == ShareSnapshot(0, 0, state(5))


def test_deleting_nothing_or_keys_never_written_succeeds(share):
    assert delete(share) == [E.none]
    assert delete(share, K2) == [E.none]
    assert share.read(K2) == (E.none, None)


# -- failed and slow appends -----------------------------------------------------------


@pytest.mark.parametrize(("stored", "answered"), [
    (E.not_leader_or_follower, E.not_coordinator),
    (E.kafka_storage_error, E.not_coordinator),
    (E.not_enough_replicas, E.coordinator_not_available),
    (E.not_enough_replicas_after_append, E.coordinator_not_available),
    (E.request_timed_out, E.coordinator_not_available),
    (E.unknown_topic_or_partition, E.coordinator_not_available),
    (E.record_list_too_large, E.unknown_server_error),
    (E.message_too_large, E.unknown_server_error),
    (E.unknown_server_error, E.unknown_server_error),
])
def test_a_failed_append_leaves_the_state_and_answers_the_mapped_error(
        share, store, stored, answered):
    write(share, K0, state(1))
    write(share, K1, state(2))
    store.fail_with = stored

    assert write(share, K0, state(4)) == [answered]
    assert delete(share, K1) == [answered]

    assert share.read(K0) == (E.none, state(1))
    assert share.read(K1) == (E.none, state(2))
    assert share.states[K0].snapshot_epoch == 0
    store.fail_with = None
    assert coordinator(store).states == share.states
    assert write(share, K0, state(4)) == [E.none]
    assert share.states[K0] == ShareSnapshot(1, 0, state(4))


def test_a_delete_failing_in_one_partition_fails_but_the_other_is_deleted():
    class LostPartition0(MemoryStore):
        lost = False

        def append(self, partition, records, callback, producer=None):
            if self.lost and partition == 0:
                callback(E.not_leader_or_follower)
            else:
                super().append(partition, records, callback, producer)

    store = LostPartition0(PARTITIONS)
    share = coordinator(store)
    write(share, K0, state(1))
    write(share, K1, state(2))
    store.lost = True

    assert delete(share, K0, K1) == [E.not_coordinator]  # one answer, the error

    assert share.read(K0) == (E.none, state(1))
    assert share.read(K1) == (E.none, None)
    assert coordinator(store).states == {K0: ShareSnapshot(0, 0, state(1))}


def test_a_held_write_changes_nothing_until_it_is_written(share, store):
    write(share, K2, state(1))
    store.hold = True

    outcome = write(share, K2, state(3, (3, 3, ACKNOWLEDGED, 1)))
    assert outcome == []
    assert share.read(K2) == (E.none, state(1))
    assert share.states[K2].snapshot_epoch == 0

    store.release()
    assert outcome == [E.none]
    assert share.read(K2) == (E.none, state(3, (3, 3, ACKNOWLEDGED, 1)))
    assert share.states[K2].snapshot_epoch == 1


def test_a_held_delete_changes_nothing_until_it_is_written(share, store):
    write(share, K2, state(1))
    store.hold = True
    outcome = delete(share, K2)
    assert (outcome, share.read(K2)) == ([], (E.none, state(1)))
    store.release()
    assert (outcome, share.read(K2)) == ([E.none], (E.none, None))


def test_held_writes_complete_in_order(share, store):
    store.hold = True
    outcomes = [write(share, K0, state(1)), write(share, K0, state(2))]
    store.release()
    assert outcomes == [[E.none], [E.none]]
    assert share.read(K0) == (E.none, state(2))


# -- leadership ------------------------------------------------------------------------


def test_resigning_drops_the_keys_of_that_partition_only(share, store):
    write(share, K0, state(1))
    write(share, K0B, state(2))
    write(share, K1, state(3))

    share.on_resigned(0)

    assert share.states == {K1: ShareSnapshot(0, 0, state(3))}
    assert share.read(K0) == (E.not_coordinator, None)
    assert write(share, K0B, state(9)) == [E.not_coordinator]
    assert share.read(K1) == (E.none, state(3))
    assert share.keys_of_group("g") == [K1]

    share.on_elected(0)  # leading it again: loaded from the topic
    assert share.read(K0) == (E.none, state(1))
    assert share.read(K0B) == (E.none, state(2))


def test_a_write_completing_after_resigning_does_not_come_back(share, store):
    write(share, K0, state(1))
    write(share, K1, state(2))
    store.hold = True
    outcome = write(share, K0, state(5))
    share.on_resigned(0)
    store.release()

    assert outcome == [E.none]
    assert share.keys_of_group("g") == [K1]
    assert share.groups() == {"g"}
    assert K0 not in share.states

    # Meanwhile another leader deleted it; when this broker leads again, it is gone.
    store.hold = False
    store.logs[0].append((encode_key(RecordType.SNAPSHOT, K0), None))
    share.on_elected(0)
    assert share.read(K0) == (E.none, None)


def test_being_elected_twice_loads_once(share, store):
    write(share, K1, state(1))
    store.logs[1].append((encode_key(RecordType.SNAPSHOT, K1), None))
    share.on_elected(1)  # already loaded: the tombstone is not read again
    assert share.read(K1) == (E.none, state(1))


def test_shutdown_drops_everything_and_startup_loads_it_again(share, store):
    write(share, K0, state(1))
    write(share, K2, state(2))

    share.shutdown()
    assert share.states == {}
    assert share.read(K0) == (E.not_coordinator, None)

    share.startup()
    assert share.read(K0) == (E.none, state(1))
    assert share.read(K2) == (E.none, state(2))


# -- groups ----------------------------------------------------------------------------


def test_the_keys_of_a_group_and_the_groups(share):
    [h0] = keys_in(0, group="h")
    [h2] = keys_in(2, group="h")
    assert share.groups() == set()
    for key in (K0, K1, h0, h2):
        write(share, key, state(0))

    assert sorted(share.keys_of_group("g"), key=str) == sorted([K0, K1], key=str)
    assert sorted(share.keys_of_group("h"), key=str) == sorted([h0, h2], key=str)
    assert share.keys_of_group("nobody") == []
    assert share.groups() == {"g", "h"}

    delete(share, h0, h2)
    assert share.groups() == {"g"}
    assert share.keys_of_group("h") == []


# -- any history -----------------------------------------------------------------------

KEYS = [K0, K0B, K1, K2]
operations = st.lists(st.tuples(
    st.sampled_from(["write", "delete", "fail"]), st.sampled_from(KEYS),
    st.integers(0, 100)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_a_restart_finds_the_state_of_any_history_of_writes_and_deletes(history):
    store = MemoryStore(PARTITIONS)
    share = coordinator(store)
    expected: dict[ShareStateKey, ShareState] = {}
    for operation, key, start in history:
        value = state(start, (start, start + 1, ACKNOWLEDGED, 1))
        if operation == "delete":
            assert delete(share, key) == [E.none]
            expected.pop(key, None)
        elif operation == "fail":
            store.fail_with = E.not_leader_or_follower
            assert write(share, key, value) == [E.not_coordinator]
            store.fail_with = None
        else:
            assert write(share, key, value) == [E.none]
            expected[key] = value

    assert {k: s.state for k, s in share.states.items()} == expected
    again = coordinator(store)
    assert again.states == share.states
    for key in KEYS:
        assert again.read(key) == (E.none, expected.get(key))

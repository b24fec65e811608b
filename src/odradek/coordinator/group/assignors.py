"""Server-side partition assignors of the consumer group protocol (KIP-848).

In the consumer group protocol the coordinator, not a group leader, decides which member
consumes which partition: whenever the group changes (a member joins or leaves, a subscription
or a topic's partition count changes) it computes a new *target assignment*, and members move
to it one heartbeat at a time. This module is that computation: Kafka's ``uniform`` (the
default) and ``range`` assignors, as pure functions of the members and the topics they
subscribe to. No I/O, no clock, no randomness: the same input gives the same assignment.

The input is each member's subscription (already resolved to topic ids), rack and current
target assignment, and each subscribed topic's partition count and the racks of its replicas.
Every member is in the result, possibly with nothing. A result is always *valid*: a partition
goes to at most one member and only to one subscribed to its topic, and every partition of
every subscribed topic goes to someone. A current assignment may be stale (a topic deleted or
recreated smaller, a subscription dropped): what is stale in it is ignored.

Uniform (Kafka's ``UniformAssignor``). Its goals, in order: balance, members' partition counts
differing by at most one where the subscriptions allow; stickiness, each member keeping as many
of its current partitions as balance allows, since every partition that moves is revoked from
one consumer and fetched again by another; and racks (below). Kafka has two builders, chosen by
whether all members subscribe to the same topics, and so does this module:

* Homogeneous (``UniformHomogeneousAssignmentBuilder``), the common case. With P partitions and
  M members each member's quota is floor(P / M), and P mod M of them get one more. The extra
  places go first to the members that hold more than floor(P / M) now, which then keep one
  more of theirs (Kafka hands them out in member order, which can take a partition from one
  member only to give another one); so an assignment this builder made is its own result
  again. Each member keeps its current partitions up to its quota, and the others are dealt
  round-robin, in topic and partition order, to the members below theirs: one pass, O(P + M).

* Heterogeneous (``UniformHeterogeneousAssignmentBuilder``). Quotas mean little when members
  subscribe to different topics, so balance is reached by moving partitions. Each member keeps
  all its current partitions; the partitions nobody holds, topic by topic (most partitions per
  subscriber first, where the choice is narrowest), go one at a time to the topic's least
  loaded subscriber; then, topic by topic, partitions move from the topic's most loaded
  subscriber that holds one to its least loaded subscriber while they differ by more than one,
  in rounds until a round moves nothing (at most 16, Kafka's bound: overlapping subscriptions
  can converge slowly). The result is balanced when a topic's subscribers all have the same
  subscriptions, and otherwise no single move of a partition between subscribers of its topic
  narrows the gap. Dealing and moving work on counts (how many of a topic each member ends
  with), and the partitions are chosen last, so a member gives up a partition it was just
  dealt rather than one it holds.

Range (Kafka's server-side ``RangeAssignor``). Topic by topic, as the classic range assignor
does: the topic's subscribers in order, static members first by instance id and then the
others by member id, each take a contiguous range of its partitions, the first P mod N of them
one more. Topics with the same subscribers and partition count are thereby co-partitioned:
partition p of each goes to the same member, as stream joins need. Current assignments are not
looked at. Kafka gave up keeping them in 3.9 (KAFKA-16944) because stickiness and
co-partitioning pull apart; static members keep their ranges through restarts by their
instance ids instead, as long as the members and topics stay the same.

Racks (both assignors). A member with a rack prefers partitions with a replica on its rack,
where it can fetch from the closest replica (KIP-392) without crossing zones. Kafka's
server-side assignors dropped this in 3.8 (KAFKA-16694); here it is a preference that never
costs balance or stickiness: it only decides among the choices those leave open. A member that
must give up some of its partitions gives up those off its rack first. Partitions being handed
out go first to members on one of their racks with room below their quotas, then to members
on one of their racks that may take one of the P mod N places one more (balance does not care
which members take those, and otherwise the first members in order do), and the rest as
without racks. The matching is greedy: partitions with the fewest racks that have room first,
each to the rack with the most room. Range matches partition p of co-partitioned topics as a
whole, on the racks they all share, which keeps co-partitioning; ranges keep their sizes but
not always their contiguity. A member without a rack matches no rack and takes what is left.
Racks are looked at only under Kafka's condition (``useRackAwareAssignment``): a subscribed
member has a rack, some partition has a replica on one of the members' racks, and the
partitions are not all on the same racks. Otherwise the assignment is exactly the one without
racks.

Members are taken in member id order and topics in topic id order wherever order matters, so
that ties are broken the same way every time; the iteration order of a set never decides.
"""

from __future__ import annotations

import heapq
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, TypeVar

Topic = uuid.UUID
Assignment = dict[Topic, frozenset[int]]

# A partition inside an assignor: (topic number, partition). Topics are numbered in topic id
# order, so partitions sort by topic id and then by partition, as small integers.
_Partition = tuple[int, int]
# What rack matching hands out: a partition, or for range a partition number of several topics.
_Unit = TypeVar("_Unit")

_NO_RACKS: frozenset[str] = frozenset()

# Rounds of the heterogeneous balancing (Kafka's MAX_ITERATION_COUNT): members subscribed to
# the same topics balance in one round; overlapping subscriptions roughly halve their imbalance
# in each, and the bound keeps an assignment's time in check.
_MAX_BALANCING_ROUNDS = 16


class PartitionAssignorError(Exception):
    """The input contradicts itself (a member or topic filed under another id, a negative
    partition count): the coordinator's bug, never anything a member did."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    # Already resolved (names and regexes) to topic ids; ids missing from the topics are ignored.
    subscribed_topics: frozenset[Topic]
    # The member's current target assignment, which the uniform assignor keeps what it can of.
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class TopicSpec:
    topic_id: Topic
    name: str
    partitions: int
    # The racks of each partition's replicas; empty when the brokers have no racks.
    partition_racks: dict[int, frozenset[str]]


class PartitionAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[Topic, TopicSpec]) -> dict[str, Assignment]:
        """Every member's new target assignment."""


class UniformAssignor:
    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[Topic, TopicSpec]) -> dict[str, Assignment]:
        group = _Group.of(members, topics)
        if group.is_homogeneous():
            return group.assignments(_assign_homogeneous(group))
        return group.assignments(_assign_heterogeneous(group))


class RangeAssignor:
    name = "range"

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[Topic, TopicSpec]) -> dict[str, Assignment]:
        group = _Group.of(members, topics)
        return group.assignments(_assign_ranges(group))


ASSIGNORS: dict[str, PartitionAssignor] = {
    assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())}


# -- the input ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Racks:
    """Where members and partitions are, when that can make a difference (see the module's
    docstring): only then does an assignor get one."""

    members: dict[str, str]  # member id -> rack, for the members that have one
    topics: tuple[TopicSpec, ...]  # by topic number

    @classmethod
    def of(cls, specs: Mapping[str, MemberSpec], topics: tuple[TopicSpec, ...],
           subscriptions: Mapping[str, frozenset[int]]) -> _Racks | None:
        """Kafka's ``useRackAwareAssignment``: None when no subscribed member has a rack, no
        partition has a replica on a member's rack, or all partitions are on the same racks
        (every member is then as close to every partition). An empty rack id is no rack."""
        members = {member_id: spec.rack_id for member_id, spec in specs.items()
                   if spec.rack_id and subscriptions[member_id]}
        if not members:
            return None
        racks = [topic.partition_racks.get(p, _NO_RACKS)
                 for topic in topics for p in range(topic.partitions)]
        everywhere = _NO_RACKS.union(*racks)
        if everywhere.isdisjoint(members.values()) or all(r == everywhere for r in racks):
            return None
        return cls(members, topics)

    def of_partition(self, partition: _Partition) -> frozenset[str]:
        topic, p = partition
        return self.topics[topic].partition_racks.get(p, _NO_RACKS)

    def is_local(self, member_id: str, partition: _Partition) -> bool:
        return self.members.get(member_id) in self.of_partition(partition)


@dataclass(frozen=True, slots=True)
class _Group:
    """One assignment's input, checked and numbered: the topics some member subscribes to, in
    topic id order, and each member's subscription as their numbers."""

    specs: Mapping[str, MemberSpec]
    members: tuple[str, ...]  # member ids, sorted
    topics: tuple[TopicSpec, ...]  # by topic number
    numbers: dict[Topic, int]  # topic id -> topic number
    subscriptions: dict[str, frozenset[int]]
    racks: _Racks | None

    @classmethod
    def of(cls, members: Mapping[str, MemberSpec],
           topics: Mapping[Topic, TopicSpec]) -> _Group:
        _check(members, topics)
        subscribed = sorted({topic_id for spec in members.values()
                             for topic_id in spec.subscribed_topics if topic_id in topics})
        numbers = {topic_id: number for number, topic_id in enumerate(subscribed)}
        specs = tuple(topics[topic_id] for topic_id in subscribed)
        subscriptions = {
            member_id: frozenset(numbers[t] for t in spec.subscribed_topics if t in numbers)
            for member_id, spec in members.items()}
        return cls(members, tuple(sorted(members)), specs, numbers, subscriptions,
                   _Racks.of(members, specs, subscriptions))

    def is_homogeneous(self) -> bool:
        return len(set(self.subscriptions.values())) <= 1

    def partitions(self, topic: int) -> range:
        return range(self.topics[topic].partitions)

    def subscribers(self, order: tuple[str, ...] | list[str]) -> list[list[str]]:
        """Each topic's subscribers, in the given order of the members."""
        subscribers: list[list[str]] = [[] for _ in self.topics]
        for member_id in order:
            for topic in self.subscriptions[member_id]:
                subscribers[topic].append(member_id)
        return subscribers

    def current(self) -> dict[str, list[_Partition]]:
        """Each member's current partitions that are still its to keep, sorted: of a topic it
        subscribes to, that exists and still has the partition. A partition in two current
        assignments (a target assignment never has one) stays with the first member by id."""
        claimed: set[_Partition] = set()
        current: dict[str, list[_Partition]] = {}
        for member_id in self.members:
            subscription = self.subscriptions[member_id]
            valid: list[_Partition] = []
            for topic_id, partitions in self.specs[member_id].assignment.items():
                topic = self.numbers.get(topic_id)
                if topic is None or topic not in subscription:
                    continue
                count = self.topics[topic].partitions
                valid.extend((topic, p) for p in partitions
                             if 0 <= p < count and (topic, p) not in claimed)
            claimed.update(valid)
            current[member_id] = sorted(valid)
        return current

    def assignments(self, owned: Mapping[str, list[_Partition]]) -> dict[str, Assignment]:
        """The result: every member, in member id order, its topics in topic id order."""
        result: dict[str, Assignment] = {}
        for member_id in self.members:
            by_topic: dict[int, list[int]] = {}
            for topic, p in owned.get(member_id, ()):
                by_topic.setdefault(topic, []).append(p)
            result[member_id] = {self.topics[topic].topic_id: frozenset(partitions)
                                 for topic, partitions in sorted(by_topic.items())}
        return result


def _check(members: Mapping[str, MemberSpec], topics: Mapping[Topic, TopicSpec]) -> None:
    for member_id, member in members.items():
        if member_id != member.member_id:
            raise PartitionAssignorError(
                f"member {member.member_id!r} given as member {member_id!r}")
    for topic_id, topic in topics.items():
        if topic_id != topic.topic_id:
            raise PartitionAssignorError(f"topic {topic.topic_id} given as topic {topic_id}")
        if topic.partitions < 0:
            raise PartitionAssignorError(
                f"topic {topic.name} ({topic_id}) has {topic.partitions} partitions")


# -- uniform, homogeneous subscriptions --------------------------------------------------


def _assign_homogeneous(group: _Group) -> dict[str, list[_Partition]]:
    """Every member keeps its current partitions up to its quota; the rest are dealt to the
    members below theirs."""
    if not group.members:
        return {}
    current = group.current()
    total = sum(topic.partitions for topic in group.topics)
    quotas, room = _quotas(total, current)
    owned: dict[str, list[_Partition]] = {}
    for member_id in group.members:
        owned[member_id] = _keep(current[member_id], quotas[member_id], member_id, group.racks)
        room.places[member_id] = quotas[member_id] - len(owned[member_id])
    taken = {partition for partitions in owned.values() for partition in partitions}
    free = [(topic, p) for topic in range(len(group.topics)) for p in group.partitions(topic)
            if (topic, p) not in taken]
    _hand_out(free, room, group.racks, owned)
    return owned


def _quotas(total: int, current: Mapping[str, list[_Partition]]) -> tuple[dict[str, int], _Room]:
    """floor(P / M) partitions for each member, and one more for P mod M of them. Members
    holding more than floor(P / M) get those first (in member id order), so that each keeps
    one more of its own; the places still over are the room's spare places, for whichever
    other members are on the right racks."""
    base, extra = divmod(total, len(current))
    members = sorted(current)
    holders = [member_id for member_id in members if len(current[member_id]) > base][:extra]
    quotas = dict.fromkeys(members, base) | dict.fromkeys(holders, base + 1)
    spare_to = [member_id for member_id, quota in quotas.items() if quota == base]
    return quotas, _Room({}, extra - len(holders), spare_to)


# -- uniform, heterogeneous subscriptions ------------------------------------------------


def _assign_heterogeneous(group: _Group) -> dict[str, list[_Partition]]:
    """Members keep all their current partitions, the free ones go to the least loaded
    subscribers, then partitions move to balance: all on counts, partitions chosen last."""
    current = group.current()
    subscribers = group.subscribers(group.members)
    held: list[dict[str, list[_Partition]]] = [{} for _ in group.topics]
    for member_id, partitions in current.items():
        for partition in partitions:
            held[partition[0]].setdefault(member_id, []).append(partition)
    # How many partitions of each topic each subscriber ends with, and of all topics.
    counts = [{member_id: len(held[topic].get(member_id, ())) for member_id in members}
              for topic, members in enumerate(subscribers)]
    load = {member_id: len(partitions) for member_id, partitions in current.items()}

    order = _topic_order(group, subscribers)
    for topic in order:
        free = group.topics[topic].partitions - sum(counts[topic].values())
        _deal(free, counts[topic], load)
    _balance(order, counts, load)
    return _choose_partitions(group, held, counts)


def _topic_order(group: _Group, subscribers: list[list[str]]) -> list[int]:
    """Kafka's order: most partitions per subscriber first (the topics whose partitions have
    the fewest places to go), then fewest subscribers, then topic id."""
    def key(topic: int) -> tuple[Fraction, int, int]:
        count = len(subscribers[topic])
        return -Fraction(group.topics[topic].partitions, count), count, topic
    return sorted(range(len(group.topics)), key=key)


def _deal(free: int, counts: dict[str, int], load: dict[str, int]) -> None:
    """Deals a topic's free partitions one at a time to its least loaded subscriber."""
    takers = [(load[member_id], member_id) for member_id in counts]
    heapq.heapify(takers)
    for _ in range(free):
        _, member_id = heapq.heappop(takers)
        counts[member_id] += 1
        load[member_id] += 1
        heapq.heappush(takers, (load[member_id], member_id))


def _balance(order: list[int], counts: list[dict[str, int]], load: dict[str, int]) -> None:
    for _ in range(_MAX_BALANCING_ROUNDS):
        moved = False
        for topic in order:
            if len(counts[topic]) > 1:
                moved |= _balance_topic(counts[topic], load)
        if not moved:
            return


def _balance_topic(counts: dict[str, int], load: dict[str, int]) -> bool:
    """Moves one topic's partitions from its most loaded subscriber that holds one to its
    least loaded subscriber while their loads differ by more than one; True if any moved.

    The heaps are lazy: an entry whose load is no longer the member's (or a giver that holds
    none of the topic any more) is dropped when it comes up, and every move pushes fresh
    entries. Each move lowers the sum of the squared loads, so this ends."""
    givers = [(-load[member_id], member_id) for member_id, n in counts.items() if n]
    takers = [(load[member_id], member_id) for member_id in counts]
    heapq.heapify(givers)
    heapq.heapify(takers)
    moved = False
    while givers:
        giver_load, giver = givers[0]
        if -giver_load != load[giver] or not counts[giver]:
            heapq.heappop(givers)
            continue
        taker_load, taker = takers[0]
        if taker_load != load[taker]:
            heapq.heappop(takers)
            continue
        if load[giver] - load[taker] <= 1:
            break
        heapq.heappop(givers)
        heapq.heappop(takers)
        counts[giver] -= 1
        load[giver] -= 1
        counts[taker] += 1
        load[taker] += 1
        for member_id in (giver, taker):
            heapq.heappush(takers, (load[member_id], member_id))
            if counts[member_id]:
                heapq.heappush(givers, (-load[member_id], member_id))
        moved = True
    return moved


def _choose_partitions(group: _Group, held: list[dict[str, list[_Partition]]],
                       counts: list[dict[str, int]]) -> dict[str, list[_Partition]]:
    """Turns counts into partitions, topic by topic: a subscriber keeps as many of the ones it
    holds as its count allows, and the others go to the subscribers that need more."""
    owned: dict[str, list[_Partition]] = {member_id: [] for member_id in group.members}
    for topic, topic_counts in enumerate(counts):
        taken: set[_Partition] = set()
        room = _Room({})
        for member_id, count in topic_counts.items():
            kept = _keep(held[topic].get(member_id, []), count, member_id, group.racks)
            owned[member_id].extend(kept)
            taken.update(kept)
            room.places[member_id] = count - len(kept)
        free = [(topic, p) for p in group.partitions(topic) if (topic, p) not in taken]
        _hand_out(free, room, group.racks, owned)
    return owned


# -- range -------------------------------------------------------------------------------


def _assign_ranges(group: _Group) -> dict[str, list[_Partition]]:
    """Contiguous ranges per topic; topics with the same subscribers and partition count (a
    family) share the ranges, which makes them co-partitioned."""
    order = sorted(group.members, key=lambda member_id: _range_order(group.specs[member_id]))
    families: dict[tuple[tuple[str, ...], int], list[int]] = {}
    for topic, subscribers in enumerate(group.subscribers(order)):
        key = (tuple(subscribers), group.topics[topic].partitions)
        families.setdefault(key, []).append(topic)

    owned: dict[str, list[_Partition]] = {member_id: [] for member_id in group.members}
    for (subscribers, count), topics in families.items():
        for member_id, numbers in _ranges(subscribers, count, topics, group.racks).items():
            owned[member_id].extend((topic, p) for topic in topics for p in numbers)
    return owned


def _range_order(member: MemberSpec) -> tuple[bool, str, str]:
    """Kafka's order: static members first, by instance id, so that they keep their ranges
    when they come back with new member ids; then the others by member id."""
    return member.instance_id is None, member.instance_id or "", member.member_id


def _ranges(subscribers: tuple[str, ...], count: int, topics: list[int],
            racks: _Racks | None) -> dict[str, list[int]]:
    """The partition numbers each subscriber of a family gets: floor(P / N) each, and one more
    for P mod N of them; on their racks where they can be, and otherwise in ranges, the first
    P mod N subscribers taking the places still over."""
    base, extra = divmod(count, len(subscribers))
    room = _Room(dict.fromkeys(subscribers, base), extra, list(subscribers))
    units = [(p, _shared_racks(racks, topics, p) if racks else _NO_RACKS) for p in range(count)]
    matched, numbers = _allot(units, room, racks)
    given: dict[str, list[int]] = {member_id: [] for member_id in subscribers}
    for p, member_id in matched:
        given[member_id].append(p)
    start = 0
    for member_id, places in room.places.items():
        given[member_id].extend(numbers[start:start + places])
        start += places
    return given


def _shared_racks(racks: _Racks, topics: list[int], p: int) -> frozenset[str]:
    """The racks on which partition ``p`` of every topic of a family has a replica."""
    first, *others = (racks.of_partition((topic, p)) for topic in topics)
    return first.intersection(*others)


# -- what the assignors share ------------------------------------------------------------


def _keep(partitions: list[_Partition], count: int, member_id: str,
          racks: _Racks | None) -> list[_Partition]:
    """The ``count`` partitions a member keeps of those it holds (all, if it holds no more):
    those on its rack first, then in topic and partition order."""
    if racks is not None and len(partitions) > count:
        partitions = sorted(partitions, key=lambda p: not racks.is_local(member_id, p))
    return partitions[:count]


@dataclass(slots=True)
class _Room:
    """The places members have for the partitions being handed out: ``places`` of their own,
    and ``spare`` more, at most one to each member of ``spare_to``. Balance does not care which
    members get the spare places, so members on the racks of the partitions take them first,
    and the members earliest in ``spare_to`` the rest."""

    places: dict[str, int]
    spare: int = 0
    spare_to: list[str] = field(default_factory=list)


def _hand_out(partitions: list[_Partition], room: _Room, racks: _Racks | None,
              owned: dict[str, list[_Partition]]) -> None:
    """Gives out partitions, exactly as many as there are places: to members on their racks
    first, then round-robin in the order of the places, so that each member gets a spread of
    the topics."""
    units = [(partition, racks.of_partition(partition) if racks else _NO_RACKS)
             for partition in partitions]
    matched, partitions = _allot(units, room, racks)
    for partition, member_id in matched:
        owned[member_id].append(partition)
    places = room.places
    members = deque(member_id for member_id, n in places.items() if n > 0)
    for partition in partitions:
        member_id = members.popleft()
        owned[member_id].append(partition)
        places[member_id] -= 1
        if places[member_id]:
            members.append(member_id)


def _allot(units: list[tuple[_Unit, frozenset[str]]], room: _Room, racks: _Racks | None
           ) -> tuple[list[tuple[_Unit, str]], list[_Unit]]:
    """Gives units (with the racks they are on) to members on those racks, first in the
    members' own places and then in spare ones, and turns the spare places left into places of
    members of ``spare_to``. Returns what went where and the units left, in order; the room's
    places are then exactly those left for them."""
    matched: list[tuple[_Unit, str]] = []
    taken: set[str] = set()
    if racks is not None:
        matched, units = _match_racks(units, room.places, racks.members)
        spare = dict.fromkeys(room.spare_to, 1)
        on_spare, units = _match_racks(units, spare, racks.members, limit=room.spare)
        matched += on_spare
        taken = {member_id for _, member_id in on_spare}
    untaken = [member_id for member_id in room.spare_to if member_id not in taken]
    for member_id in untaken[:room.spare - len(taken)]:
        room.places[member_id] += 1
    return matched, [unit for unit, _ in units]


def _match_racks(units: list[tuple[_Unit, frozenset[str]]], places: dict[str, int],
                 member_racks: Mapping[str, str], limit: int | None = None
                 ) -> tuple[list[tuple[_Unit, str]], list[tuple[_Unit, frozenset[str]]]]:
    """Gives units to members with places on one of their racks (at most ``limit`` units),
    taking the places from ``places``; returns what went where, and the units left, in order.

    Greedy: the units with the fewest racks that have places go first, each to the rack with
    the most places (ties: the rack's name), and within a rack round-robin in the order of
    ``places``."""
    on_rack: dict[str, deque[str]] = {}
    for member_id, n in places.items():
        rack = member_racks.get(member_id)
        if rack is not None and n > 0:
            on_rack.setdefault(rack, deque()).append(member_id)
    rack_places = {rack: sum(places[m] for m in members) for rack, members in on_rack.items()}

    def options(racks: frozenset[str]) -> list[str]:
        return [rack for rack in racks if rack_places.get(rack, 0) > 0]

    matched: list[tuple[_Unit, str]] = []
    given: set[int] = set()
    for index in sorted(range(len(units)), key=lambda i: len(options(units[i][1]))):
        if len(matched) == limit:
            break
        candidates = options(units[index][1])
        if not candidates:
            continue
        rack = min(candidates, key=lambda r: (-rack_places[r], r))
        member_id = on_rack[rack].popleft()
        matched.append((units[index][0], member_id))
        given.add(index)
        places[member_id] -= 1
        rack_places[rack] -= 1
        if places[member_id]:
            on_rack[rack].append(member_id)
    return matched, [unit for index, unit in enumerate(units) if index not in given]

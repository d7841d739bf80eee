"""In-memory metadata of a classic group and its members (Kafka's GroupMetadata / MemberMetadata,
``ClassicGroup`` / ``ClassicGroupMember`` in the group-coordinator module).

Membership is transient state: who waits in a JoinGroup or SyncGroup (``join_waiter`` /
``sync_waiter`` hold the caller's reply token and the request version), pending member ids,
awaiting counts. The coordinator changes it directly. Committed offsets change only by replaying
``__consumer_offsets`` records (GroupCoordinator.replay), and transactional offsets (KIP-98,
TxnOffsetCommit) also by the COMMIT/ABORT marker that ends their transaction
(GroupCoordinator.complete_txn).
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from typing import Any, Callable

from kcompat.group.records import OffsetAndMetadata
from kcompat.group.state import GroupEvent, GroupState, next_state
from kcompat.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kcompat.protocol.primitives import DecodeError

log = logging.getLogger("kcompat.group")

CONSUMER_PROTOCOL_TYPE = "consumer"

Waiter = tuple[Any, int]  # (reply_to token, request version)


class Member:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_waiter",
                 "sync_waiter", "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]], assignment: bytes = b"") -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # (name, metadata) in the member's order of preference
        self.assignment = assignment
        self.join_waiter: Waiter | None = None
        self.sync_waiter: Waiter | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order (Kafka's MemberMetadata.matches)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """At session expiry: new members must have completed a join; members waiting in a join or
        sync count as alive; everyone else needed a heartbeat (which would have rescheduled)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"


def group_int_config(overrides: dict[str, str], name: str, default: int) -> int:
    """An integer GROUP config of a group (``overrides``: its dynamic configs, name -> value
    string, e.g. ``share.heartbeat.interval.ms``), else ``default`` (the broker's)."""
    value = overrides.get(name)
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def existing_or_new(groups: dict[str, "Group"], new_group: Callable[[str], "Group"], group_id: str,
                    create: bool) -> "Group | None":
    """``groups[group_id]``; else a new Empty group from ``new_group`` if ``create``, else None."""
    group = groups.get(group_id)
    if group is None and create:
        group = new_group(group_id)
    return group


class Group:
    __slots__ = ("group_id", "partition", "state", "state_timestamp", "protocol_type", "protocol_name",
                 "generation_id", "leader_id", "members", "static_members", "pending_members",
                 "pending_sync", "num_awaiting_join", "supported_protocols", "new_member_added",
                 "subscribed_topics", "offsets", "offset_positions", "pending_commits", "pending_txn",
                 "transitions", "consumer", "share", "streams")

    def __init__(self, group_id: str, partition: int, state: GroupState, now_ms: int | None) -> None:
        self.group_id = group_id
        self.partition = partition
        self.reset_classic(state, now_ms)
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # log offset of the record each committed offset comes from: when a transaction commits,
        # its offset wins only over an older committed one (Kafka's record offset rule)
        self.offset_positions: dict[tuple[str, int], int] = {}
        self.pending_commits: Counter[tuple[str, int]] = Counter()  # written, not yet replayed
        # transactional offsets waiting for their transaction's marker: producer id ->
        # partition -> (log offset of the record, offset); not visible to OffsetFetch
        self.pending_txn: dict[int, dict[tuple[str, int], tuple[int, OffsetAndMetadata]]] = {}
        self.transitions: list[tuple[GroupState, GroupEvent, GroupState]] = []
        # a KIP-848 consumer group's membership (kcompat.group.consumer_group.ConsumerGroup); None
        # for a classic group. Classic membership stays empty while it is set.
        self.consumer = None
        # a KIP-932 share group's membership (kcompat.group.share_group.ShareGroup); None otherwise
        self.share = None
        # a KIP-1071 streams group's membership (kcompat.group.streams_group.StreamsGroup); None otherwise
        self.streams = None

    @property
    def epoch_membership(self):
        """The membership whose members commit with member epochs and subscribe to topics: the
        consumer group's (KIP-848) or the streams group's (KIP-1071); None for classic and share
        groups."""
        return self.consumer if self.consumer is not None else self.streams

    @property
    def type_name(self) -> str:
        """ListGroups' group type: "consumer" for a KIP-848 group, "share" for a KIP-932 group,
        "streams" for a KIP-1071 group, "classic" otherwise."""
        if self.share is not None:
            return "share"
        if self.streams is not None:
            return "streams"
        return "classic" if self.consumer is None else "consumer"

    def reset_classic(self, state: GroupState, now_ms: int | None) -> None:
        """A new classic membership in ``state`` with no members (the offsets are not touched):
        a new group, or one changing protocol, where Kafka replaces the group object (a new
        ClassicGroup, Empty or Stable, or a ConsumerGroup) rather than making a transition of
        the classic state machine."""
        self.state = state
        self.state_timestamp: int | None = now_ms  # Kafka's currentStateTimestamp
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order: the first member is the next leader
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    def has_live_members(self) -> bool:
        """Members of any protocol (a group with members is never removed or expired)."""
        return (bool(self.members) or (self.consumer is not None and bool(self.consumer.members))
                or (self.share is not None and bool(self.share.members))
                or (self.streams is not None and bool(self.streams.members)))

    # -- state ---------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, event: GroupEvent, now_ms: int) -> None:
        new = next_state(self.state, event)
        self.transitions.append((self.state, event, new))
        del self.transitions[:-16]
        self.state = new
        self.state_timestamp = now_ms

    # -- members -------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in names)

    def add(self, member: Member, waiter: Waiter | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_waiter = waiter
        if waiter is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], waiter: Waiter | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        if waiter is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif waiter is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_waiter = waiter

    def take_join_waiter(self, member: Member) -> Waiter | None:
        waiter = member.join_waiter
        if waiter is not None:
            member.join_waiter = None
            self.num_awaiting_join -= 1
        return waiter

    @staticmethod
    def take_sync_waiter(member: Member) -> Waiter | None:
        waiter = member.sync_waiter
        member.sync_waiter = None
        return waiter

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``instance_id`` the member id ``new_id``; the caller fences whoever
        waited under the old id (its waiters are returned on the member before the swap)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: keep a leader that rejoined, else pick any member that
        did; False when there is no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                log.info("group %s: leader %s did not rejoin in time, %s is the new leader",
                         self.group_id, self.leader_id, m.member_id)
                self.leader_id = m.member_id
                return True
        return False

    def select_protocol(self) -> str:
        """The protocol every member supports with the most votes, each member voting for its most
        preferred candidate (Kafka's selectProtocol). Ties go to the protocol whose first vote came
        first in member order."""
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        n = len(self.members)
        candidates = {p for p, c in self.supported_protocols.items() if c == n}
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(p for p in votes if votes[p] == best)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"no member metadata for a group in state {self.state}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(GroupEvent.JOIN_COMPLETE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(GroupEvent.JOIN_COMPLETE_EMPTY, now_ms)
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, for consumer groups (None = unknown: treat every topic as
        subscribed). Each subscription is read as ConsumerProtocolSubscription v0, the prefix of
        every later version, as Kafka does."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                buf = memoryview(m.metadata(self.protocol_name))
                if len(buf) < 2:
                    raise DecodeError("subscription shorter than its version")
                sub, _ = ConsumerProtocolSubscription.read(buf, 2, 0)
                topics.update(sub.topics)
        except (DecodeError, struct.error, IndexError, ValueError, KeyError) as e:
            log.warning("group %s: cannot parse consumer protocol subscriptions (%s); subscribed topics unknown",
                        self.group_id, e)
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- offsets -------------------------------------------------------------------------------

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(+self.pending_commits) or bool(self.pending_txn)

    def offset_partitions(self) -> set[tuple[str, int]]:
        """Partitions with a committed offset, a commit written but not yet replayed, or a
        transactional offset waiting for its transaction to end."""
        return (set(self.offsets) | {tp for tp, n in self.pending_commits.items() if n > 0}
                | self.pending_txn_partitions())

    def put_offset(self, tp: tuple[str, int], om: OffsetAndMetadata, position: int) -> None:
        """Make ``om`` the committed offset of ``tp`` (latest commits last, as in the log)."""
        self.offsets.pop(tp, None)
        self.offsets[tp] = om
        self.offset_positions[tp] = position

    def remove_offset(self, tp: tuple[str, int]) -> None:
        """A tombstone: the committed offset and every transactional offset pending for ``tp``
        go (Kafka's OffsetMetadataManager.replay of a tombstone)."""
        self.offsets.pop(tp, None)
        self.offset_positions.pop(tp, None)
        for producer_id in [pid for pid, pending in self.pending_txn.items() if tp in pending]:
            pending = self.pending_txn[producer_id]
            del pending[tp]
            if not pending:
                del self.pending_txn[producer_id]

    def has_pending_txn(self, tp: tuple[str, int]) -> bool:
        return any(tp in pending for pending in self.pending_txn.values())

    def pending_txn_partitions(self) -> set[tuple[str, int]]:
        return {tp for pending in self.pending_txn.values() for tp in pending}

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended: on commit its offsets become committed unless a
        newer commit (a record further in the log) is there already; on abort they are dropped.
        Returns how many offsets became committed."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending or not commit:
            return 0
        n = 0
        for tp, (position, om) in pending.items():
            current = self.offset_positions.get(tp) if tp in self.offsets else None
            if current is None or current < position:
                self.put_offset(tp, om, position)
                n += 1
        return n

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state}, gen={self.generation_id}, members={list(self.members)})"

"""A fake broker around one GroupCoordinator: it appends each Result's records to an in-memory
``__consumer_offsets`` log, replays them, then collects the replies (encoding every reply at its
request version, so a value the codec cannot write fails the test).

The log holds what the broker's loader hands to ``GroupCoordinator.load``: ``(offset, key, value)``
for plain records, ``(offset, key, value, producer_id)`` for transactional offset commits, and
:class:`TxnMarker` entries for the COMMIT/ABORT markers :meth:`Broker.marker` writes."""

from __future__ import annotations

import itertools
import struct
from collections import defaultdict

from kcompat.group import GroupConfig, GroupCoordinator, Record, Result, TxnMarker
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kcompat.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest
from kcompat.protocol.messages.describe_groups import DescribeGroupsRequest
from kcompat.protocol.messages.heartbeat import HeartbeatRequest
from kcompat.protocol.messages.join_group import JoinGroupRequest
from kcompat.protocol.messages.leave_group import LeaveGroupRequest
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.protocol.messages.offset_delete import OffsetDeleteRequest
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest
from kcompat.protocol.messages.sync_group import SyncGroupRequest
from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

T0 = 1_700_000_000_000
FAST = GroupConfig(initial_rebalance_delay_ms=100, num_partitions=4)


def subscription(*topics: str, version: int = 1) -> bytes:
    out = bytearray(struct.pack(">h", version))
    ConsumerProtocolSubscription(topics=list(topics), user_data=None).write(out, version)
    return bytes(out)


def assignment(partitions: dict[str, list[int]], version: int = 1) -> bytes:
    out = bytearray(struct.pack(">h", version))
    ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in partitions.items()],
        user_data=None).write(out, version)
    return bytes(out)


class Broker:
    def __init__(self, config: GroupConfig = FAST, topics: dict[str, int] | None = None, *, own: bool = True,
                 now: int = T0, txn_verifier=None) -> None:
        self.config = config
        self.topics = {"t": 6, "u": 3} if topics is None else dict(topics)
        self.now = now
        self.log: dict[int, list] = defaultdict(list)
        self.appended: list[Record] = []  # every record in append order, all partitions
        self._uuids = itertools.count(1)
        self.coord = GroupCoordinator(config, partition_exists=self.partition_exists, new_uuid=self._uuid,
                                      txn_verifier=txn_verifier)
        self.replies: dict[object, object] = {}
        self._versions: dict[object, int] = {}
        self._tokens = itertools.count(1)
        if own:
            for p in range(config.num_partitions):
                self.coord.load(p, [], self.now)

    def _uuid(self) -> str:
        return f"uuid{next(self._uuids)}"

    def partition_exists(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.topics.get(topic, 0)

    # -- plumbing ------------------------------------------------------------------------------

    def apply(self, result: Result) -> Result:
        assert isinstance(result, Result)
        for r in result.records:
            assert isinstance(r, Record)
            entries = self.log[r.partition]
            r.offset = len(entries)
            if r.producer_id >= 0:
                entries.append((r.offset, r.key, r.value, r.producer_id))
            else:
                entries.append((r.offset, r.key, r.value))
            self.appended.append(r)
        for r in result.records:
            self.coord.replay(r)
        for token, response in result.replies:
            assert token not in self.replies, f"two replies for {token}"
            out = bytearray()
            response.write(out, self._versions[token])  # must encode at the request's version
            self.replies[token] = response
        return result

    def call(self, method: str, req, version: int, *extra) -> object:
        token = (method, next(self._tokens))
        self._versions[token] = version
        self.apply(getattr(self.coord, method)(token, req, version, *extra, self.now))
        return token

    def reply(self, token):
        """The reply to ``token`` if it has arrived (and forget it), else None."""
        return self.replies.pop(token, None)

    def answered(self, token) -> bool:
        return token in self.replies

    def advance(self, ms: int) -> Result:
        self.now += ms
        return self.apply(self.coord.poll(self.now))

    def marker(self, partition: int, producer_id: int, commit: bool) -> Result:
        """The transaction coordinator writes the COMMIT/ABORT marker of ``producer_id`` to
        ``partition``, then tells the group coordinator (GroupRuntime.write_txn_marker)."""
        entries = self.log[partition]
        entries.append(TxnMarker(len(entries), producer_id, commit))
        return self.apply(self.coord.complete_txn(partition, producer_id, commit, self.now))

    def records(self, partition: int | None = None) -> list:
        if partition is None:
            return [e for p in sorted(self.log) for e in self.log[p]]
        return list(self.log[partition])

    def group(self, group_id: str):
        return self.coord._groups.get(group_id)

    # -- requests ------------------------------------------------------------------------------

    def join(self, group: str, member_id: str = "", *, version: int = 5, client_id: str = "c",
             protocols=None, session: int = 10_000, rebalance: int = 30_000, instance: str | None = None,
             protocol_type: str = "consumer", reason: str | None = None, topics=("t",)):
        if protocols is None:
            protocols = [("range", subscription(*topics)), ("roundrobin", subscription(*topics))]
        req = JoinGroupRequest(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                               member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                                          for n, m in protocols], reason=reason)
        return self.call("join_group", req, version, client_id, "/127.0.0.1")

    def sync(self, group: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             version: int = 3, instance: str | None = None, protocol_type: str | None = "consumer",
             protocol_name: str | None = "range"):
        req = SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
                               assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                            for m, a in (assignments or {}).items()])
        return self.call("sync_group", req, version)

    def heartbeat(self, group: str, member_id: str, generation: int, *, version: int = 3,
                  instance: str | None = None) -> int:
        req = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance)
        return self.reply(self.call("heartbeat", req, version)).error_code

    def leave(self, group: str, member_id: str = "", *, version: int = 1, members=None):
        if version >= 3:
            req = LeaveGroupRequest(group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i, reason="bye")
                for m, i in members])
        else:
            req = LeaveGroupRequest(group_id=group, member_id=member_id)
        return self.reply(self.call("leave_group", req, version))

    def commit(self, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1, member_id: str = "",
               version: int = 8, metadata: str | None = "", leader_epoch: int = -1, instance: str | None = None,
               retention: int = -1, commit_timestamp: int = -1) -> dict[tuple[str, int], int]:
        topics: dict[str, list] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=leader_epoch,
                commit_timestamp=commit_timestamp, committed_metadata=metadata))
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                                  group_instance_id=instance, retention_time_ms=retention, topics=[
                                      OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                      for t, ps in topics.items()])
        resp = self.reply(self.call("offset_commit", req, version))
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def txn_commit(self, group: str, offsets: dict[tuple[str, int], int], *, producer_id: int = 1000,
                   producer_epoch: int = 0, version: int = 3, generation: int = -1, member_id: str = "",
                   instance: str | None = None, metadata: str | None = "", leader_epoch: int = -1,
                   transactional_id: str = "tid") -> dict[tuple[str, int], int]:
        """TxnOffsetCommit; {(topic, partition): error}."""
        topics: dict[str, list] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=leader_epoch,
                committed_metadata=metadata))
        req = TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group, producer_id=producer_id,
                                     producer_epoch=producer_epoch, generation_id=generation, member_id=member_id,
                                     group_instance_id=instance, topics=[
                                         TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                                         for t, ps in topics.items()])
        resp = self.reply(self.call("txn_offset_commit", req, version))
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def fetch(self, group: str, partitions: list[tuple[str, int]] | None = None, *, version: int = 7,
              require_stable: bool = False):
        """{(topic, partition): (offset, leader epoch, metadata, error)} and the group error."""
        if version >= 8:
            topics = (None if partitions is None
                      else self._fetch_topics(partitions, OffsetFetchRequest.OffsetFetchRequestTopics))
            req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)],
                                     require_stable=require_stable)
            resp = self.reply(self.call("offset_fetch", req, version))
            g = resp.groups[0]
            return ({(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                                   p.error_code)
                     for t in g.topics for p in t.partitions}, g.error_code)
        topics = (None if partitions is None
                  else self._fetch_topics(partitions, OffsetFetchRequest.OffsetFetchRequestTopic))
        req = OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable)
        resp = self.reply(self.call("offset_fetch", req, version))
        return ({(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                 for t in resp.topics for p in t.partitions}, resp.error_code)

    @staticmethod
    def _fetch_topics(partitions, cls):
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        return [cls(name=t, partition_indexes=ps) for t, ps in by_topic.items()]

    def describe(self, *groups: str, version: int = 5, ops: bool = False):
        req = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=ops)
        return self.reply(self.call("describe_groups", req, version)).groups

    def list_groups(self, *, states=(), types=(), version: int = 5):
        req = ListGroupsRequest(states_filter=list(states), types_filter=list(types))
        return self.reply(self.call("list_groups", req, version))

    def delete_groups(self, *groups: str, version: int = 2) -> dict[str, int]:
        resp = self.reply(self.call("delete_groups", DeleteGroupsRequest(groups_names=list(groups)), version))
        return {r.group_id: r.error_code for r in resp.results}

    def offset_delete(self, group: str, partitions: list[tuple[str, int]]):
        topics: dict[str, list] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p))
        req = OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
        resp = self.reply(self.call("offset_delete", req, 0))
        return resp.error_code, {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    # -- flows ---------------------------------------------------------------------------------

    def join_new(self, group: str, *, version: int = 5, **kw):
        """A dynamic member's first JoinGroup, repeated with the id MEMBER_ID_REQUIRED gives (v4+).
        Returns (member id, token of the JoinGroup that waits)."""
        token = self.join(group, version=version, **kw)
        resp = self.reply(token)
        if version >= 4:
            assert resp is not None and resp.error_code == ErrorCode.MEMBER_ID_REQUIRED, resp
            member_id = resp.member_id
            return member_id, self.join(group, member_id, version=version, **kw)
        assert resp is None, resp
        return None, token

    def form_group(self, group: str, n: int, *, topics=("t",), **kw) -> list[tuple[str, int]]:
        """n dynamic members join and sync; the leader assigns partition i to member i.
        Returns [(member id, generation)] with the leader first."""
        tokens = []
        ids = []
        for _ in range(n):
            mid, tok = self.join_new(group, topics=topics, **kw)
            ids.append(mid)
            tokens.append(tok)
        for _ in range(100):
            if all(self.answered(t) for t in tokens):
                break
            self.advance(max(1, self.config.initial_rebalance_delay_ms))
        resps = [self.reply(t) for t in tokens]
        assert all(r is not None and r.error_code == 0 for r in resps), resps
        gen = resps[0].generation_id
        leader = resps[0].leader
        members = [r.member_id for r in resps]
        plan = {m: assignment({topics[0]: [i]}) for i, m in enumerate(members)}
        order = [leader] + [m for m in members if m != leader]
        stoks = {}
        for m in order[1:]:
            stoks[m] = self.sync(group, m, gen)
        stoks[leader] = self.sync(group, leader, gen, plan)
        for m, t in stoks.items():
            r = self.reply(t)
            assert r is not None and r.error_code == 0 and r.assignment == plan[m], r
        return [(m, gen) for m in order]

"""Random sequences of client requests and clock ticks against one coordinator (hypothesis
stateful testing). After every step:

- every group's state transitions came from the table (kcompat.group.state);
- structural invariants of Kafka's GroupMetadata hold;
- no request is lost: every JoinGroup/SyncGroup not yet answered waits in a member;
- every member is either waiting in a join/sync or has a session deadline;
- a fresh coordinator loading the log has the same committed offsets and pending transactional
  offsets (and, for quiescent groups, the same group metadata).

Clients also commit offsets in transactions (TxnOffsetCommit v3 with their group metadata, one
producer id per client) that commit or abort at random.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcompat.group import GroupConfig, GroupState
from kcompat.group.state import TRANSITIONS
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import Broker, assignment, subscription
from tests.group.test_load import snapshot

S = GroupState
CONFIG = GroupConfig(initial_rebalance_delay_ms=50, num_partitions=2, max_size=4, offsets_retention_ms=300_000,
                     offsets_retention_check_interval_ms=60_000)
G = "g"
CLIENTS = [f"c{i}" for i in range(6)]
STATIC = {"c4": "inst-4", "c5": "inst-5"}
TOPICS = {"c0": ("t",), "c1": ("t", "u"), "c2": ("t",), "c3": ("u",), "c4": ("t",), "c5": ("t",)}


class Client:
    def __init__(self, name: str) -> None:
        self.name = name
        self.instance = STATIC.get(name)
        self.member_id = ""
        self.generation = -1
        self.is_leader = False
        self.members: list[str] = []
        self.join_token = None
        self.sync_token = None
        self.topics = TOPICS[name]
        self.synced = False


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = Broker(CONFIG)
        self.clients = {n: Client(n) for n in CLIENTS}
        self.outstanding: set = set()
        self.orphans: set = set()  # requests of a static member's previous process

    # -- helpers ---------------------------------------------------------------------------

    def _harvest(self) -> None:
        for c in self.clients.values():
            if c.join_token is not None and self.b.answered(c.join_token):
                r = self.b.reply(c.join_token)
                self.outstanding.discard(c.join_token)
                c.join_token = None
                if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    c.member_id = r.member_id
                elif r.error_code == 0:
                    c.member_id, c.generation = r.member_id, r.generation_id
                    c.is_leader = r.leader == r.member_id
                    c.members = [m.member_id for m in r.members]
                    c.synced = False
                elif r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1
            if c.sync_token is not None and self.b.answered(c.sync_token):
                r = self.b.reply(c.sync_token)
                self.outstanding.discard(c.sync_token)
                c.sync_token = None
                if r.error_code == 0:
                    c.synced = True
                elif r.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1
                else:  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: join again
                    c.generation = -1
        for token in [t for t in self.orphans if self.b.answered(t)]:
            self.b.reply(token)
            self.orphans.discard(token)
            self.outstanding.discard(token)
        assert not self.b.replies.keys() & self.outstanding

    # -- rules -------------------------------------------------------------------------------

    # client steps, weighted towards the group protocol: the common paths reach Stable often
    @rule(name=st.sampled_from(CLIENTS),
          action=st.sampled_from(["join"] * 4 + ["sync"] * 4 + ["heartbeat"] * 3 + ["leave", "commit", "commit",
                                                                                   "txn", "txn", "restart"]),
          version=st.sampled_from([3, 4, 5, 9]), flag=st.booleans(), partition=st.integers(0, 5),
          offset=st.integers(0, 100))
    def client_step(self, name, action, version, flag, partition, offset):
        if action == "join":
            self.join(name, version, flag and partition == 0)
        elif action == "sync":
            self.sync(name, flag and partition == 0)
        elif action == "heartbeat":
            self.heartbeat(name)
        elif action == "leave":
            self.leave(name)
        elif action == "commit":
            self.commit(name, partition, offset)
        elif action == "txn":
            self.txn_commit(name, partition, offset)
        elif STATIC.get(name):  # a static member's process restarts and forgets its member id
            c = self.clients[name]
            self.orphans.update(t for t in (c.join_token, c.sync_token) if t is not None)
            c.join_token = c.sync_token = None
            c.member_id, c.generation, c.synced = "", -1, False

    @rule(name=st.sampled_from(CLIENTS), version=st.sampled_from([3, 4, 5, 9]))
    def client_next_step(self, name, version):
        """What a well-behaved client does next: join until it has a generation, sync once, then
        heartbeat (and rejoin when told to)."""
        c = self.clients[name]
        if c.join_token is not None or c.sync_token is not None:
            return
        if c.generation < 0 or not c.member_id:
            self.join(name, version, False)
        elif not c.synced:
            self.sync(name, False)
        else:
            self.heartbeat(name)

    def join(self, name, version, change):
        c = self.clients[name]
        if c.join_token is not None:
            return
        topics = c.topics + (("u",) if change and "u" not in c.topics else ())
        protocols = [("range", subscription(*topics)), ("roundrobin", subscription(*topics))]
        if name == "c3":
            protocols = protocols[::-1]
        version = max(version, 5) if c.instance else version
        c.join_token = self.b.join(G, c.member_id, version=version, protocols=protocols, instance=c.instance,
                                   client_id=name, session=10_000, rebalance=20_000)
        self.outstanding.add(c.join_token)
        self._harvest()

    def sync(self, name, skip_one):
        c = self.clients[name]
        if c.sync_token is not None or c.join_token is not None or c.generation < 0:
            return
        plan = None
        if c.is_leader:
            members = c.members[1:] if skip_one and len(c.members) > 1 else c.members
            plan = {m: assignment({"t": [i]}) for i, m in enumerate(members)}
        group = self.b.group(G)
        proto = group.protocol_name if group is not None and group.protocol_name else "range"
        c.sync_token = self.b.sync(G, c.member_id, c.generation, plan, instance=c.instance, version=5,
                                   protocol_name=proto)
        self.outstanding.add(c.sync_token)
        self._harvest()

    def heartbeat(self, name):
        c = self.clients[name]
        if c.member_id:
            code = self.b.heartbeat(G, c.member_id, c.generation, instance=c.instance)
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                c.member_id, c.generation = "", -1
            elif code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                c.generation = -1
        self._harvest()

    def leave(self, name):
        c = self.clients[name]
        if c.member_id and c.instance is None:
            self.b.leave(G, version=3, members=[(c.member_id, None)])
            c.member_id, c.generation = "", -1
        self._harvest()

    def commit(self, name, partition, offset):
        c = self.clients[name]
        self.b.commit(G, {("t", partition): offset}, generation=c.generation, member_id=c.member_id,
                      instance=c.instance if c.member_id else None, metadata=name)
        self._harvest()

    def txn_commit(self, name, partition, offset):
        c = self.clients[name]
        self.b.txn_commit(G, {("t", partition): offset}, producer_id=CLIENTS.index(name), generation=c.generation,
                          member_id=c.member_id, instance=c.instance if c.member_id else None, metadata=name)
        self._harvest()

    @rule(producer=st.integers(0, len(CLIENTS) - 1), commit=st.booleans())
    def end_txn(self, producer, commit):
        """The transaction coordinator writes the producer's marker to every partition."""
        for p in range(CONFIG.num_partitions):
            self.b.marker(p, producer, commit)
        self._harvest()

    @rule(action=st.sampled_from(["commit", "commit", "txn", "delete", "offset_delete"]),
          group=st.sampled_from([G, "h1", "h2"]), topic=st.sampled_from(["t", "u"]), partition=st.integers(0, 2),
          offset=st.integers(0, 100), retention=st.sampled_from([-1, -1, 100_000]),
          producer=st.integers(0, len(CLIENTS) - 1))
    def admin_step(self, action, group, topic, partition, offset, retention, producer):
        if action == "commit":  # a standalone consumer (generation -1)
            self.b.commit(group, {(topic, partition): offset}, version=2 if retention != -1 else 8,
                          retention=retention)
        elif action == "txn":  # a transactional producer without group metadata (v2)
            self.b.txn_commit(group, {(topic, partition): offset}, producer_id=producer, version=2)
        elif action == "delete":
            self.b.delete_groups(group)
        else:
            self.b.offset_delete(group, [(topic, partition)])
        self._harvest()

    @rule(ms=st.sampled_from([1, 50, 50, 1_000, 5_000, 9_000, 10_001, 20_001, 60_000, 300_001]))
    def tick(self, ms):
        self.b.advance(ms)
        self._harvest()

    @rule()
    def reload_matches(self):
        fresh = Broker(CONFIG, self.b.topics, own=False, now=self.b.now)
        for p in range(CONFIG.num_partitions):
            fresh.coord.load(p, self.b.records(p), fresh.now)
        live = {g: dict(x.offsets) for g, x in self.b.coord._groups.items() if x.offsets}
        loaded = {g: dict(x.offsets) for g, x in fresh.coord._groups.items() if x.offsets}
        assert live == loaded
        live = {g: x.pending_txn for g, x in self.b.coord._groups.items() if x.pending_txn}
        loaded = {g: x.pending_txn for g, x in fresh.coord._groups.items() if x.pending_txn}
        assert live == loaded
        live_meta = snapshot(self.b.coord, quiescent_only=True)
        loaded_meta = snapshot(fresh.coord)
        for gid, snap in live_meta.items():
            assert loaded_meta.get(gid) == snap, gid

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def groups_are_consistent(self):
        coord = self.b.coord
        waiting = set()
        for gid, g in coord._groups.items():
            assert g.state is not S.DEAD
            for old, event, new in g.transitions:
                assert TRANSITIONS[(old, event)] is new
            assert g.num_awaiting_join == sum(m.awaiting_join for m in g.members.values())
            assert g.supported_protocols == Counter(p for m in g.members.values() for p in m.protocol_names())
            assert g.pending_sync <= set(g.members)
            assert g.static_members == {m.group_instance_id: mid for mid, m in g.members.items() if m.is_static}
            if g.members:
                assert g.leader_id in g.members
            if g.is_(S.EMPTY):
                assert not g.members and g.protocol_name is None
            if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
                assert g.members and all(g.protocol_name in m.protocol_names() for m in g.members.values())
                assert not any(m.awaiting_join for m in g.members.values())
            if g.is_(S.PREPARING_REBALANCE):
                assert not any(m.awaiting_sync for m in g.members.values())
                assert ("join", gid) in coord._timers
            if g.is_(S.STABLE):
                assert not any(m.awaiting_sync for m in g.members.values())
            for mid, m in g.members.items():
                assert m.awaiting_join or m.awaiting_sync or ("hb", gid, mid) in coord._timers, (gid, mid)
                for w in (m.join_waiter, m.sync_waiter):
                    if w is not None:
                        waiting.add(w[0])
        assert waiting == self.outstanding, (waiting, self.outstanding)


GroupMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=100, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestGroupMachine = GroupMachine.TestCase

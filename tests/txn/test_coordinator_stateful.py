"""Two producers sharing a transactional id (the second a zombie-fencing replacement of the first,
and so on), with random transactions, commits, aborts, marker failures, timeouts, failed appends,
expiration and coordinator restarts (hypothesis stateful testing). After every step:

- every transition of the transactional id came from the table (kcompat.txn.state);
- one producer epoch is active: a (producer id, epoch) is handed to one producer only, handed-out
  and written pairs only grow, and only the pair the coordinator holds gets AddPartitions/EndTxn
  through; a producer once fenced (durably) stays fenced;
- zombies are fenced: once a producer got a newer pair from InitProducerId, or its transaction was
  aborted by a fence (another producer's InitProducerId, or its timeout), no request with an older
  pair gets through and the abort markers carry a newer epoch;
- completed transactions never reopen: in the log, a Complete* is followed by Empty or a new
  Ongoing, a transaction prepares one outcome only, every marker written carries the outcome of the
  Prepare* record in force, and Complete* is written only after the markers of every partition;
- the coordinator's state is the fold of the log (a fresh coordinator loading it agrees).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcompat.protocol.errors import ErrorCode
from kcompat.txn.coordinator import TransactionCoordinator
from kcompat.txn.state import TRANSITIONS, TxnState
from kcompat.txn.txn_records import parse_key, parse_value
from tests.txn.test_coordinator_harness import FAST, TxnBroker

S = TxnState
E = ErrorCode
TID = "shared"
TIMEOUT = 5000
PARTS = [("t", 0), ("t", 1), ("u", 0)]
FENCED = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH}


class Producer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pid = -1
        self.epoch = -1
        self.fenced: set[tuple[int, int]] = set()

    @property
    def pair(self) -> tuple[int, int]:
        return self.pid, self.epoch


class ZombieMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = TxnBroker(FAST)
        self.producers = {n: Producer(n) for n in "AB"}
        self.issued: dict[tuple[int, int], str] = {}  # (pid, epoch) -> producer it was handed to
        self.last_issued = (-1, -1)
        self.last_current = (-1, -1)
        self.dead: set[tuple[int, int]] = set()  # zombie pairs: fenced by a newer producer or a timeout

    # -- helpers -----------------------------------------------------------------------------

    def current(self) -> tuple[int, int] | None:
        """The pair requests are checked against (with an epoch bumped by a fence in flight)."""
        m = self.b.meta(TID)
        return None if m is None or not m.visible else (m.producer_id, m.epoch)

    def durable(self) -> tuple[int, int] | None:
        """The pair of the last record (a fence that could not be written is lost on restart, as
        in Kafka, so it does not count as durable)."""
        m = self.b.meta(TID)
        return None if m is None or not m.visible else (m.producer_id, m.producer_epoch)

    def answered(self, p: Producer, error: int, before: tuple[int, int] | None) -> None:
        if error == 0:
            assert before == p.pair, (p.name, p.pair, before)
            assert p.pair not in p.fenced, f"{p.name} fenced at {p.pair} came back"
            assert p.pair not in self.dead, f"zombie {p.name} at {p.pair} got through"
        elif error in FENCED and self.durable() != p.pair:
            p.fenced.add(p.pair)

    # -- rules -------------------------------------------------------------------------------

    @rule(name=st.sampled_from("AB"), kip360=st.booleans())
    def init(self, name, kip360):
        p = self.producers[name]
        was, before = self.b.state(TID), self.durable()
        if kip360 and p.pid >= 0:
            r = self.b.init(TID, TIMEOUT, version=4, pid=p.pid, epoch=p.epoch)
        else:
            r = self.b.init(TID, TIMEOUT, version=4)
        if r.error_code == 0:
            pair = (r.producer_id, r.producer_epoch)
            owner = self.issued.setdefault(pair, name)
            assert owner == name, f"{pair} handed to {owner} and {name}"
            retry = kip360 and pair == self.last_issued  # KIP-360: a retry gets the same epoch again
            assert pair > self.last_issued or retry, (pair, self.last_issued)
            self.last_issued = max(self.last_issued, pair)
            p.pid, p.epoch = pair
            self.dead.update(q for q in self.issued if q < pair)  # every older producer is a zombie now
        elif r.error_code == E.CONCURRENT_TRANSACTIONS and was is S.ONGOING:
            self.fenced_transaction(before)
        elif r.error_code in FENCED:
            p.fenced.add(p.pair)
        else:
            assert r.error_code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                                    E.UNKNOWN_SERVER_ERROR), r

    @precondition(lambda self: any(p.pid >= 0 for p in self.producers.values()))
    @rule(name=st.sampled_from("AB"), parts=st.lists(st.sampled_from(PARTS), min_size=1, max_size=3),
          version=st.sampled_from([1, 3]))
    def add(self, name, parts, version):
        p = self.producers[name]
        before = self.current()
        errors = set(self.b.add(TID, p.pid, p.epoch, parts, version=version).values())
        assert len(errors) == 1
        self.answered(p, errors.pop(), before)

    @precondition(lambda self: any(p.pid >= 0 for p in self.producers.values()))
    @rule(name=st.sampled_from("AB"), group=st.sampled_from(["g1", "g2"]))
    def add_offsets(self, name, group):
        p = self.producers[name]
        before = self.current()
        self.answered(p, self.b.add_offsets(TID, p.pid, p.epoch, group), before)

    @precondition(lambda self: any(p.pid >= 0 for p in self.producers.values()))
    @rule(name=st.sampled_from("AB"), commit=st.booleans())
    def end(self, name, commit):
        p = self.producers[name]
        before = self.current()
        m = self.b.meta(TID)
        was = None if m is None else m.state
        error = self.b.end(TID, p.pid, p.epoch, commit)
        self.answered(p, error, before)
        if error == 0 and was in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            assert was is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)

    @rule(fail=st.lists(st.sampled_from(PARTS + [("__consumer_offsets", 0)]), max_size=2),
          fenced=st.booleans())
    def write_markers(self, fail, fenced):
        m = self.b.meta(TID)
        for mk in self.b.marker_queue:
            # a marker carries the outcome of the Prepare* record in force, for the current pair
            assert m is not None and m.state is (S.PREPARE_COMMIT if mk.commit else S.PREPARE_ABORT), (mk, m)
            assert (mk.producer_id, mk.producer_epoch) == (m.producer_id, m.producer_epoch)
            assert (mk.producer_id, mk.producer_epoch) not in self.dead  # abort markers fence the zombie
        code = E.INVALID_PRODUCER_EPOCH if fenced else E.NOT_LEADER_OR_FOLLOWER
        self.b.write_markers({tp: code for tp in fail})

    def fenced_transaction(self, before: tuple[int, int] | None) -> None:
        """The transaction of pair ``before`` was aborted to fence its producer (if the abort was
        written: a fence whose record was lost is retried)."""
        m = self.b.meta(TID)
        if m is not None and m.state is S.PREPARE_ABORT and m.transitions[-2][1].value == "fence_epoch":
            self.dead.add(before)
            assert (m.producer_id, m.producer_epoch) > before

    @rule(ms=st.sampled_from([1, 100, 1000, 6000]))
    def advance(self, ms):
        was, before = self.b.state(TID), self.durable()
        self.b.advance(ms)
        if was is S.ONGOING:
            self.fenced_transaction(before)

    @rule()
    def idle_until_expired(self):
        self.b.advance(FAST.transactional_id_expiration_ms + FAST.remove_expired_interval_ms)

    @rule()
    def restart(self):
        self.b.restart()

    @rule(code=st.sampled_from([E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_SERVER_ERROR]))
    def fail_next_append(self, code):
        self.b.fail_next = code

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def transitions_come_from_the_table(self):
        m = self.b.meta(TID)
        for old, event, new in m.transitions if m is not None else ():
            assert TRANSITIONS[(old, event)] is new

    @invariant()
    def one_producer_epoch_is_active(self):
        cur = self.durable()
        holders = [p.name for p in self.producers.values() if cur == p.pair]
        assert len(holders) <= 1
        if cur is not None:
            assert cur >= self.last_current  # producer id / epoch never go back
            self.last_current = cur
            if holders and cur in self.issued:
                assert self.issued[cur] == holders[0]

    @invariant()
    def completed_transactions_never_reopen(self):
        states = []
        for r in self.b.appended:
            if parse_key(r.key) != TID:
                continue
            v = parse_value(r.value)
            states.append(None if v is None else v.state)
        prepared = None
        for prev, cur in zip([None] + states, states):
            if prev in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                assert cur in (None, S.EMPTY, S.ONGOING), (prev, cur)
            if cur in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                assert prev is S.ONGOING, (prev, cur)
                prepared = cur
            if cur is S.COMPLETE_COMMIT:
                assert prev is S.PREPARE_COMMIT and prepared is S.PREPARE_COMMIT
            if cur is S.COMPLETE_ABORT:
                assert prev is S.PREPARE_ABORT and prepared is S.PREPARE_ABORT

    @invariant()
    def completed_only_after_every_marker(self):
        """Each Complete* record follows markers (same pair, same outcome) on every partition of
        the transaction: counted, since a pair may run several transactions."""
        need: dict[tuple, int] = {}
        prepared = None
        for r in self.b.appended:
            if parse_key(r.key) != TID or r.value is None:
                continue
            v = parse_value(r.value)
            if v.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                prepared = v
            elif v.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                for tp in prepared.partitions:
                    key = (tp, prepared.producer_id, prepared.producer_epoch, v.state is S.COMPLETE_COMMIT)
                    need[key] = need.get(key, 0) + 1
        for (tp, pid, epoch, commit), n in need.items():
            written = sum(1 for m in self.b.markers_log[tp] if m[:3] == (pid, epoch, commit))
            assert written >= n, (tp, pid, epoch, commit, written, n)

    @invariant()
    def state_is_the_fold_of_the_log(self):
        m = self.b.meta(TID)
        if m is not None and m.pending is not None:
            return
        fresh = TransactionCoordinator(FAST, allocate_producer_id=lambda: 0, partition_exists=lambda t, p: True,
                                       group_partition_for=lambda g: 0)
        p = fresh.partition_for(TID)
        fresh.load(p, self.b.log[p], self.b.now)
        f = fresh.metadata(TID)
        if m is None or not m.visible:
            assert f is None
        else:
            assert f is not None
            assert (f.producer_id, f.producer_epoch, f.timeout_ms, f.state, f.partitions, f.txn_start_ms,
                    f.last_update_ms) == (m.producer_id, m.producer_epoch, m.timeout_ms, m.state, m.partitions,
                                          m.txn_start_ms, m.last_update_ms)

    @invariant()
    def fenced_pairs_are_not_current(self):
        cur = self.current()
        for p in self.producers.values():
            assert cur is None or cur not in p.fenced


TestZombieFencing = ZombieMachine.TestCase
TestZombieFencing.settings = settings(max_examples=200, stateful_step_count=40, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])

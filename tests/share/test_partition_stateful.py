"""Random sequences of produce, share fetch, acknowledgement, member departure, clock ticks, log
start moves and leader restarts against one share partition (hypothesis stateful testing).

The machine keeps its own per-record model — who holds which record until when, how often each
record was delivered, which records are done — built only from what the partition returned and
the documented rules, and checks after every step that:

- a record is never ACQUIRED by two members, and never handed out while held;
- a record acknowledged (or archived) is never acquired again;
- a delivery count is one more than the record's previous one and never exceeds the limit;
- only data records are handed out (never a control record or a compacted gap) and never below
  the SPSO;
- the SPSO never decreases and every record below it is done (or went with the log start);
- a failed acknowledgement changes nothing;
- a partition rebuilt from ``persisted_state()`` has the same SPSO, the same done records, and
  every other record AVAILABLE with the delivery count it had before its current acquisition;
- at the end every record offered is acquired and acknowledged or archived: nothing is stuck.
"""

from __future__ import annotations

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcompat.protocol.errors import ErrorCode
from kcompat.share.partition import AcknowledgeType as A, DeliveryState as S, SharePartition, SharePartitionConfig

LOCK = 100
LIMIT = 4
MAX_LOCKS = 30
MAX_BATCH = 6
CFG = SharePartitionConfig(record_lock_duration_ms=LOCK, delivery_count_limit=LIMIT, max_record_locks=MAX_LOCKS)
MEMBERS = ("m0", "m1", "m2")


class SharePartitionMachine(RuleBasedStateMachine):
    cfg = CFG

    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartition(self.cfg, 0)
        self.now = 0
        self.log: list[tuple[int, int, bool]] = []      # (base, last, is_control)
        self.log_end = 0
        self.log_start = 0
        self.records: set[int] = set()                  # offsets of data records
        self.held: dict[int, tuple[str, int]] = {}      # offset -> (member, lock deadline)
        self.count: dict[int, int] = {}                 # offset -> deliveries
        self.done: set[int] = set()                     # acknowledged or archived records
        self.gone: set[int] = set()                     # records that left with the log start
        self.last_spso = 0

    # ------------------------------------------------------------------ helpers

    def read(self, offset: int, nbatches: int) -> list[tuple[int, int, bool]]:
        return [b for b in self.log if b[1] >= offset][:nbatches]

    def released(self, offsets) -> None:
        """Records whose acquisition ended without a verdict: AVAILABLE, or done at the limit."""
        for o in offsets:
            del self.held[o]
            if self.count[o] >= LIMIT:
                self.done.add(o)

    def check_window(self) -> None:
        sp = self.sp
        for o, (member, _deadline) in self.held.items():
            if o >= sp.start_offset:
                assert sp.state_of(o) == (S.ACQUIRED, self.count[o], member), o
        for first, last, state, count, member, deadline in sp.in_flight_records():
            assert count <= LIMIT
            assert (member is not None) == (state == S.ACQUIRED) == (deadline is not None)
            for o in range(first, last + 1):
                if o in self.done:
                    assert state in (S.ACKNOWLEDGED, S.ARCHIVED), o
                elif o in self.records:
                    assert state in (S.AVAILABLE, S.ACQUIRED), (o, state)
                    assert (state == S.ACQUIRED) == (o in self.held), o
                    assert count == self.count.get(o, 0), o

    # ------------------------------------------------------------------ rules

    @rule(size=st.integers(1, MAX_BATCH), gap=st.integers(0, 3), control=st.booleans())
    def produce(self, size, gap, control):
        self.append(size, gap, control)

    @rule(sizes=st.lists(st.integers(1, MAX_BATCH), min_size=2, max_size=8))
    def produce_many(self, sizes):
        for size in sizes:
            self.append(size, 0, False)

    def append(self, size, gap, control):
        base = self.log_end + gap
        if control:
            size = 1
        self.log.append((base, base + size - 1, control))
        if not control:
            self.records.update(range(base, base + size))
        self.log_end = base + size

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 12), nbatches=st.integers(1, 4),
          record_limit=st.booleans(), tell_fetch_offset=st.booleans())
    def fetch(self, member, max_records, nbatches, record_limit, tell_fetch_offset):
        sp = self.sp
        f = sp.fetch_offset()
        if f is None:
            event("fetch: window full")
            assert sp.in_flight_count >= self.cfg.max_record_locks
            assert all(s != S.AVAILABLE for _f, _l, s, *_ in sp.in_flight_records())
            return
        spso = sp.start_offset
        batches = self.read(f, nbatches)
        got = sp.acquire(member, batches, max_records, self.now, record_limit_mode=record_limit,
                         fetch_offset=f if tell_fetch_offset else None)
        total = 0
        prev = None
        for r in got:
            assert r.first_offset <= r.last_offset
            if prev is not None:
                assert r.first_offset > prev.last_offset
                assert r.first_offset > prev.last_offset + 1 or r.delivery_count != prev.delivery_count
            prev = r
            assert 1 <= r.delivery_count <= LIMIT
            for o in range(r.first_offset, r.last_offset + 1):
                assert o >= spso and o in self.records, o
                assert o not in self.held, f"{o} acquired twice"
                assert o not in self.done, f"{o} is done"
                assert r.delivery_count == self.count.get(o, 0) + 1, o
                self.count[o] = r.delivery_count
                self.held[o] = (member, self.now + LOCK)
                total += 1
        if record_limit:
            assert total <= max_records
        event("fetch: acquired" if total else "fetch: nothing")
        if any(r.delivery_count > 1 for r in got):
            event("fetch: redelivery")
        if any(r.delivery_count == LIMIT for r in got):
            event("fetch: last attempt")
        # new records stop at max_record_locks, give or take the rest of one batch and its gap
        assert sp.in_flight_count <= self.cfg.max_record_locks + MAX_BATCH + 3

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        mine = sorted(o for o, (m, _d) in self.held.items() if m == member and o >= self.sp.start_offset)
        if not mine:
            return
        i = data.draw(st.integers(0, len(mine) - 1))
        j = i
        while j + 1 < len(mine) and mine[j + 1] == mine[j] + 1 and j - i < 8:
            j += 1
        j = data.draw(st.integers(i, j))
        first, last = mine[i], mine[j]
        per_offset = data.draw(st.booleans())
        ack = st.sampled_from([A.ACCEPT, A.RELEASE, A.REJECT, A.RENEW, A.GAP])
        types = data.draw(st.lists(ack, min_size=last - first + 1, max_size=last - first + 1)) \
            if per_offset else [data.draw(ack)]
        assert self.sp.acknowledge(member, [(first, last, types)], self.now) == ErrorCode.NONE
        for o in range(first, last + 1):
            t = types[o - first] if per_offset else types[0]
            if t == A.RENEW:
                self.held[o] = (member, self.now + LOCK)
            elif t == A.RELEASE:
                self.released([o])
            else:
                del self.held[o]
                self.done.add(o)

    @rule(member=st.sampled_from(MEMBERS), first=st.integers(-3, 60), length=st.integers(1, 6),
          ack=st.sampled_from(list(A)), extra=st.integers(0, 5))
    def acknowledge_anything(self, member, first, length, ack, extra):
        """A request that may be wrong anywhere: all or nothing."""
        sp = self.sp
        batches = [(first, first + length - 1, [ack]), (first + length + extra, first + length + extra, [A.ACCEPT])]
        before = sp.in_flight_records()
        spso = sp.start_offset
        code = sp.acknowledge(member, batches, self.now)
        event(f"acknowledge_anything: {code.name}")
        if code != ErrorCode.NONE:
            assert sp.in_flight_records() == before and sp.start_offset == spso
            return
        for f, l, types in batches:
            for o in range(max(f, spso), l + 1):
                assert self.held[o][0] == member, o
                t = types[0]
                if t == A.RENEW:
                    self.held[o] = (member, self.now + LOCK)
                elif t == A.RELEASE:
                    self.released([o])
                else:
                    del self.held[o]
                    self.done.add(o)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member):
        mine = [o for o, (m, _d) in self.held.items() if m == member]
        assert self.sp.release_member(member, self.now) == bool(mine)
        self.released(mine)

    @rule(ms=st.integers(1, 2 * LOCK))
    def tick(self, ms):
        self.now += ms
        expired = [o for o, (_m, d) in self.held.items() if d <= self.now]
        assert self.sp.expire_locks(self.now) == bool(expired)
        self.released(expired)

    @rule()
    def restart(self):
        """A new leader loads what the old one wrote last."""
        old = self.sp
        start, batches = old.persisted_state()
        assert start == old.start_offset
        assert all(b.delivery_state in (0, 2, 4) for b in batches)
        self.sp = SharePartition(self.cfg, start, batches)
        event("restart while records are held" if self.held else "restart")
        assert self.sp.start_offset == start
        for o in list(self.held):
            del self.held[o]
            self.count[o] -= 1          # the acquisition was never persisted

    @rule(data=st.data())
    def log_start_moves(self, data):
        bases = [b[0] for b in self.log if b[0] > self.log_start]
        if not bases:
            return
        new = data.draw(st.sampled_from(bases[:4]))
        self.log = [b for b in self.log if b[0] >= new]
        self.log_start = new
        if new > self.sp.start_offset:
            self.sp.move_start(new)
        for o in list(self.held):
            if o < new:
                del self.held[o]
        self.gone.update(o for o in self.records if o < new and o not in self.done)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def spso_moves_forward_over_done_records(self):
        spso = self.sp.start_offset
        assert spso >= self.last_spso
        for o in range(self.last_spso, spso):
            assert o not in self.records or o in self.done or o in self.gone, o
        self.last_spso = spso
        assert self.sp.start_offset <= self.sp.end_offset

    @invariant()
    def window_is_contiguous_and_coalesced(self):
        ranges = self.sp.in_flight_records()
        assert (ranges[0][0] if ranges else self.sp.end_offset) == self.sp.start_offset
        assert (ranges[-1][1] + 1 if ranges else self.sp.start_offset) == self.sp.end_offset
        assert not ranges or ranges[0][2] in (S.AVAILABLE, S.ACQUIRED)      # a done prefix is trimmed
        for a, b in zip(ranges, ranges[1:]):
            assert a[1] + 1 == b[0]
            assert a[2:] != b[2:], (a, b)

    @invariant()
    def window_matches_model(self):
        self.check_window()

    @invariant()
    def next_deadline_is_the_earliest_lock(self):
        live = [d for o, (_m, d) in self.held.items() if o >= self.sp.start_offset]
        assert self.sp.next_deadline() == (min(live) if live else None)

    @invariant()
    def persisted_state_round_trips(self):
        start, batches = self.sp.persisted_state()
        copy = SharePartition(self.cfg, start, batches)
        assert copy.start_offset == self.sp.start_offset
        assert copy.persisted_state() == (start, batches)

    def teardown(self):
        """Every record is eventually delivered and acknowledged or archived."""
        sp = self.sp
        self.now += 10 * LOCK
        sp.expire_locks(self.now)
        self.released(list(self.held))
        for _ in range(10 * (self.log_end + 5)):
            f = sp.fetch_offset()
            assert f is not None
            batches = self.read(f, 1000)
            got = sp.acquire("drain", batches, 1000, self.now, fetch_offset=f)
            for r in got:
                assert sp.acknowledge("drain", [(r.first_offset, r.last_offset, [A.ACCEPT])], self.now) == ErrorCode.NONE
                for o in range(r.first_offset, r.last_offset + 1):
                    assert o not in self.done and o in self.records
                    self.done.add(o)
            if sp.start_offset >= self.log_end and not got:
                break
        assert sp.start_offset == max(self.log_end, self.log_start)
        assert sp.in_flight_records() == []
        assert all(o in self.done or o in self.gone for o in self.records)


class SmallWindowMachine(SharePartitionMachine):
    """The same with a window of 8 offsets: acquisition often stops at max_record_locks."""

    cfg = SharePartitionConfig(record_lock_duration_ms=LOCK, delivery_count_limit=LIMIT, max_record_locks=8)


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
TestSmallWindowMachine = SmallWindowMachine.TestCase
TestSmallWindowMachine.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)

"""A fake broker around one TransactionCoordinator: it appends each Result's records to an
in-memory ``__transaction_state`` log and replays them, collects the replies (encoding each at its
request version, so a value the codec cannot write fails the test) and queues the marker requests;
:meth:`TxnBroker.write_markers` "writes" them (to an in-memory marker log per data partition) and
reports back with ``markers_written``. The tests of this module check the harness itself."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Callable

from kcompat.group.coordinator import partition_for as group_partition_for
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kcompat.protocol.messages.end_txn import EndTxnRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.list_transactions import ListTransactionsRequest
from kcompat.txn.coordinator import MarkerRequest, Record, Result, TransactionCoordinator, TxnConfig
from kcompat.txn.state import TxnState

T0 = 1_700_000_000_000
FAST = TxnConfig(num_partitions=4, abort_timed_out_interval_ms=1000, remove_expired_interval_ms=60_000,
                 transactional_id_expiration_ms=600_000)
TOPICS = {"t": 4, "u": 2, "__consumer_offsets": 50}
DEAD = TxnState.DEAD

Tp = tuple[str, int]


def request_topics(cls, partitions):
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return [cls(name=t, partitions=ps) for t, ps in by_topic.items()]


class TxnBroker:
    def __init__(self, config: TxnConfig = FAST, topics: dict[str, int] | None = None, *, own: bool = True,
                 now: int = T0, first_pid: int = 1000) -> None:
        self.config = config
        self.topics = dict(TOPICS if topics is None else topics)
        self.now = now
        self.log: dict[int, list[tuple[int, bytes, bytes | None]]] = defaultdict(list)
        self.appended: list[Record] = []
        self.pids = itertools.count(first_pid)
        self.allocated: list[int] = []
        self.coordinator_epoch = 0
        self.tv = 0  # the cluster's finalized transaction.version, as the coordinator reads it
        self.coord = self._new_coordinator()
        self.replies: dict[object, object] = {}
        self._versions: dict[object, int] = {}
        self._tokens = itertools.count(1)
        self.marker_queue: list[MarkerRequest] = []
        # data partition -> markers written there: (producer id, epoch, commit, coordinator epoch)
        self.markers_log: dict[Tp, list[tuple[int, int, bool, int]]] = defaultdict(list)
        self.fail_next: int | None = None  # error code for the next append of records
        if own:
            for p in range(config.num_partitions):
                self.apply(self.coord.load(p, [], self.now, coordinator_epoch=self.coordinator_epoch))

    def _allocate(self) -> int:
        pid = next(self.pids)
        self.allocated.append(pid)
        return pid

    def _new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config, allocate_producer_id=self._allocate,
            partition_exists=lambda t, p: 0 <= p < self.topics.get(t, 0),
            group_partition_for=lambda g: group_partition_for(g, 50), transaction_version=lambda: self.tv)

    # -- plumbing ------------------------------------------------------------------------------

    def apply(self, result: Result) -> Result:
        assert isinstance(result, Result)
        if result.records and self.fail_next is not None:
            code, self.fail_next = self.fail_next, None
            return self.apply(self.coord.append_failed(result, code, self.now))
        for r in result.records:
            assert isinstance(r, Record)
            entries = self.log[r.partition]
            entries.append((len(entries), r.key, r.value))
            self.appended.append(r)
        for r in result.records:
            self.coord.replay(r)
        for token, response in result.replies:
            assert token not in self.replies, f"two replies for {token}"
            out = bytearray()
            response.write(out, self._versions[token])  # must encode at the request's version
            self.replies[token] = response
        self.marker_queue.extend(result.markers)
        return result

    def call(self, method: str, req, version: int):
        token = (method, next(self._tokens))
        self._versions[token] = version
        self.apply(getattr(self.coord, method)(token, req, version, self.now))
        resp = self.replies.pop(token)
        return resp

    def advance(self, ms: int) -> Result:
        self.now += ms
        return self.apply(self.coord.poll(self.now))

    def write_markers(self, errors: dict[Tp, int] | Callable[[MarkerRequest, Tp], int] | None = None
                      ) -> list[MarkerRequest]:
        """Write every queued marker request, reporting ``errors`` (default: all written)."""
        queue, self.marker_queue = self.marker_queue, []
        for mk in queue:
            reported = {}
            for tp in mk.partitions:
                if callable(errors):
                    code = errors(mk, tp)
                else:
                    code = (errors or {}).get(tp, 0)
                if code == 0:
                    self.markers_log[tp].append((mk.producer_id, mk.producer_epoch, mk.commit, mk.coordinator_epoch))
                reported[tp] = code
            self.apply(self.coord.markers_written(mk.transactional_id, mk.producer_id, mk.producer_epoch, reported,
                                                  self.now, coordinator_epoch=mk.coordinator_epoch))
        return queue

    def restart(self, *, coordinator_epoch: int | None = None) -> Result:
        """A new coordinator that loads every partition from the log (markers queued are lost)."""
        self.coordinator_epoch = self.coordinator_epoch + 1 if coordinator_epoch is None else coordinator_epoch
        self.coord = self._new_coordinator()
        self.marker_queue = []
        markers = []
        for p in range(self.config.num_partitions):
            self.coord.begin_loading(p)
        for p in range(self.config.num_partitions):
            result = self.apply(self.coord.load(p, list(self.log[p]), self.now,
                                                coordinator_epoch=self.coordinator_epoch))
            markers.extend(result.markers)
        return Result(markers=markers)

    def meta(self, tid: str):
        return self.coord.metadata(tid)

    def state(self, tid: str) -> TxnState:
        m = self.meta(tid)
        return DEAD if m is None else m.state

    # -- requests ------------------------------------------------------------------------------

    def init(self, tid: str | None, timeout: int = 60_000, *, version: int = 4, pid: int = -1, epoch: int = -1):
        req = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout, producer_id=pid,
                                    producer_epoch=epoch)
        return self.call("init_producer_id", req, version)

    def begin(self, tid: str, timeout: int = 60_000) -> tuple[int, int]:
        r = self.init(tid, timeout)
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def add(self, tid: str, pid: int, epoch: int, partitions: list[Tp], *, version: int = 3) -> dict[Tp, int]:
        req = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=request_topics(AddPartitionsToTxnRequest.AddPartitionsToTxnTopic, partitions))
        resp = self.call("add_partitions_to_txn", req, version)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}

    def add_batch(self, txns: list[tuple[str, int, int, bool, list[Tp]]], *, version: int = 4
                  ) -> dict[str, dict[Tp, int]]:
        req = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
                topics=request_topics(AddPartitionsToTxnRequest.AddPartitionsToTxnTopic, parts))
            for tid, pid, epoch, verify, parts in txns])
        resp = self.call("add_partitions_to_txn", req, version)
        assert resp.error_code == 0
        return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                     for t in r.topic_results for p in t.results_by_partition}
                for r in resp.results_by_transaction}

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str = "g", *, version: int = 3) -> int:
        req = AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)
        return self.call("add_offsets_to_txn", req, version).error_code

    def end(self, tid: str, pid: int, epoch: int, commit: bool, *, version: int = 3) -> int:
        return self.end_response(tid, pid, epoch, commit, version=version).error_code

    def end_response(self, tid: str, pid: int, epoch: int, commit: bool, *, version: int = 5):
        req = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
        return self.call("end_txn", req, version)

    def describe(self, *tids: str):
        return self.call("describe_transactions", DescribeTransactionsRequest(transactional_ids=list(tids)),
                         0).transaction_states

    def list_txns(self, *, states=(), pids=(), duration: int = -1, version: int = 1):
        req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(pids),
                                      duration_filter=duration)
        return self.call("list_transactions", req, version)


def offsets_partition(group: str) -> Tp:
    return ("__consumer_offsets", group_partition_for(group, 50))


# ---------------------------------------------------------------------------------------------
# the harness itself
# ---------------------------------------------------------------------------------------------


def test_harness_commits_a_transaction_end_to_end():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add("x", pid, epoch, [("t", 0)]) == {("t", 0): 0}
    assert b.end("x", pid, epoch, True) == 0
    b.write_markers()
    assert b.markers_log[("t", 0)] == [(pid, epoch, True, 0)]
    assert b.state("x") is TxnState.COMPLETE_COMMIT
    assert not b.marker_queue and b.coord.next_deadline() is not None


def test_harness_restart_keeps_the_log():
    b = TxnBroker()
    b.begin("x")
    n = len(b.appended)
    b.restart()
    assert len(b.appended) == n and b.state("x") is TxnState.EMPTY
    assert ErrorCode.NONE == 0

"""DescribeTransactions and ListTransactions (KIP-664) for the transaction coordinator: read-only
views of its transactional ids (Kafka's TransactionCoordinator.handleDescribeTransactions and
TransactionStateManager.listTransactionStates). Composed into
:class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

import re2

from kcompat.coordinator.java_strings import concurrent_map_table_size, java_hash_order
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsResponse
from kcompat.protocol.messages.list_transactions import ListTransactionsResponse
from kcompat.txn.coordinator_types import Result
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import PREPARE_STATES, TxnState


class TxnDescriber:
    """DescribeTransactions and ListTransactions; its only collaborator is the ``shard``, which
    it does not change (beyond building the Result of the call)."""

    def __init__(self, shard: TxnShard) -> None:
        self._shard = shard

    def describe_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        """DescribeTransactions v0: the state of each transactional id asked for. Per-id errors:
        COORDINATOR_NOT_AVAILABLE (shut down), INVALID_REQUEST (empty id), NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND."""
        self._shard.begin(now_ms)
        states = [self._describe_one(tid) for tid in req.transactional_ids]
        self._shard.reply(reply_to, DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states))
        return self._shard.end()

    def _describe_one(self, tid: str) -> DescribeTransactionsResponse.TransactionState:
        out = DescribeTransactionsResponse.TransactionState(transactional_id=tid)
        if not self._shard.active:
            out.error_code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return out
        if not tid:
            out.error_code = int(ErrorCode.INVALID_REQUEST)
            return out
        error = self._shard.owner_error(tid)
        if error is not None:
            out.error_code = int(error)
            return out
        m = self._shard.get(tid)
        if m is None or not m.visible:
            out.error_code = int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            return out
        # in Prepare*, only the partitions still waiting for their marker (Kafka removes the others)
        partitions = m.markers_remaining if m.state in PREPARE_STATES else m.partitions
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        out.error_code = 0
        out.transaction_state = str(m.state)
        out.transaction_timeout_ms = m.timeout_ms
        out.transaction_start_time_ms = m.txn_start_ms
        out.producer_id = m.producer_id
        out.producer_epoch = m.producer_epoch
        out.topics = [DescribeTransactionsResponse.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
        return out

    def list_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ListTransactions v0-2: the transactional ids this coordinator owns, filtered by state,
        producer id, (v1, KIP-994) running longer than ``duration_filter`` ms and (v2, KIP-1152)
        a ``transactional_id_pattern`` the whole id matches (RE2 syntax, as Kafka's RE2/J; null
        or empty: no filter); unknown state names come back in ``unknown_state_filters``.
        Errors: COORDINATOR_NOT_AVAILABLE (shut down), COORDINATOR_LOAD_IN_PROGRESS (a partition
        is loading), INVALID_REGULAR_EXPRESSION (a pattern RE2 refuses)."""
        shard = self._shard
        shard.begin(now_ms)
        if not shard.active:
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif shard.loading_any():
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        elif (pattern := _id_pattern(req, version)) is False:
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REGULAR_EXPRESSION))
        else:
            unknown: list[str] = []
            wanted_states: set[TxnState] = set()
            for name in req.state_filters:
                state = TxnState.from_name(name)
                if state is None:
                    unknown.append(name)
                else:
                    wanted_states.add(state)
            wanted_pids = set(req.producer_id_filters)
            duration = req.duration_filter if version >= 1 else -1
            states = []
            for m in _listing_order(shard):
                tid = m.transactional_id
                if not m.visible or m.state is TxnState.DEAD:
                    continue
                if wanted_pids and m.producer_id not in wanted_pids:
                    continue
                if req.state_filters and m.state not in wanted_states:
                    continue
                if duration >= 0 and now_ms - m.txn_start_ms <= duration:  # KIP-994: running longer than
                    continue
                if pattern is not None and pattern.fullmatch(tid) is None:
                    continue
                states.append(ListTransactionsResponse.TransactionState(
                    transactional_id=tid, producer_id=m.producer_id, transaction_state=str(m.state)))
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                            transaction_states=states)
        shard.reply(reply_to, resp)
        return shard.end()


def _id_pattern(req, version: int):
    """ListTransactions v2's ``transactional_id_pattern`` compiled (KIP-1152); None for no filter
    (before v2, null or empty), False if RE2 refuses it."""
    text = req.transactional_id_pattern if version >= 2 else None
    if not text:
        return None
    try:
        return re2.compile(text)
    except re2.error:
        return False


def _listing_order(shard: TxnShard) -> list:
    """The transactional ids in the order Kafka's ``TransactionStateManager.listTransactionStates``
    lists them (and ``kafka-transactions list`` prints them): by ``__transaction_state`` partition,
    ascending (its map of partitions), then in each partition's ``ConcurrentHashMap`` order."""
    by_partition: dict[int, dict[str, object]] = {}
    for m in shard.transactions():
        by_partition.setdefault(shard.partition_for(m.transactional_id), {})[m.transactional_id] = m
    return [ids[tid] for _p, ids in sorted(by_partition.items())
            for tid in java_hash_order(ids, concurrent_map_table_size(len(ids)))]

"""A small hand-driven network of Raft cores for the rule tests: messages are delivered only when
a test says so, possibly filtered, so each rule can be set up exactly."""

from __future__ import annotations

import random

from kcompat.kraft.raft import (
    MemoryQuorumStateStore, MemoryRaftLog, RaftClient, RaftConfig, Send,
)
from kcompat.protocol import records as rb


def batch(*values: bytes, ts: int = 0) -> bytes:
    return rb.build_batch([(ts, None, v, ()) for v in values])


class Net:
    """Clients by node id; ``pending`` holds messages in flight as (src, dst, message)."""

    def __init__(self, voters=(1, 2, 3), observers=(), seed: int = 0, **config) -> None:
        self.voters = frozenset(voters)
        self.now = 0
        self.config = config
        self.logs = {i: MemoryRaftLog() for i in (*voters, *observers)}
        self.stores = {i: MemoryQuorumStateStore() for i in (*voters, *observers)}
        self.seed = seed
        self.clients: dict[int, RaftClient] = {}
        self.pending: list[tuple[int, int, object]] = []
        for i in (*voters, *observers):
            self.start(i)

    def start(self, i: int) -> RaftClient:
        cfg = RaftConfig(node_id=i, voters=self.voters, cluster_id="test", **self.config)
        self.clients[i] = RaftClient(cfg, self.logs[i], self.stores[i], random.Random(self.seed * 100 + i),
                                     self.now)
        return self.clients[i]

    def crash(self, i: int) -> None:
        self.logs[i].crash()
        self.pending = [p for p in self.pending if p[1] != i]
        del self.clients[i]

    def poll(self, *ids: int) -> None:
        for i in ids or list(self.clients):
            if i in self.clients:
                result = self.clients[i].poll(self.now)
                for msg in result.outbound:
                    if type(msg) is Send:
                        self.pending.append((i, msg.destination, msg))
                    else:
                        self.pending.append((i, msg.reply_to[0], msg))

    def deliver(self, drop=lambda src, dst, msg: False, rounds: int = 50) -> None:
        """Deliver everything in flight (and what that causes) until quiet."""
        for _ in range(rounds):
            self.poll()
            if not self.pending:
                return
            pending, self.pending = self.pending, []
            for src, dst, msg in pending:
                if dst not in self.clients or drop(src, dst, msg):
                    continue
                if type(msg) is Send:
                    self.clients[dst].handle_request(msg.request, (src, msg.request_id), self.now)
                else:
                    self.clients[dst].handle_response(msg.reply_to[1], msg.response, self.now)

    def advance(self, ms: int, step: int = 10, drop=lambda src, dst, msg: False) -> None:
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step)
            self.deliver(drop)

    def leader(self) -> RaftClient | None:
        leaders = [c for c in self.clients.values() if c.is_leader]
        return leaders[0] if len(leaders) == 1 else None

    def elect(self, within_ms: int = 10_000) -> RaftClient:
        end = self.now + within_ms
        while self.now < end:
            self.advance(10)
            leader = self.leader()
            if leader is not None and leader.high_watermark is not None:
                return leader
        raise AssertionError("no leader elected")

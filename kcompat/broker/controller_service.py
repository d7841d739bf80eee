"""Controller operations in a cluster: run them on the active controller, forward them otherwise.

The active controller is the leader of the metadata quorum. An operation (CreateTopics,
DeleteTopics, CreatePartitions, config changes, AllocateProducerIds, broker registration and
heartbeats) runs there one at a time, as Kafka's ``QuorumController`` event queue does: it is
validated against the metadata image, its records are committed through the Raft quorum, and the
response is sent once they are applied to the image. On any other node the request is forwarded
to the active controller's controller listener and its response returned as is (Kafka's
``ForwardingManager``); with no reachable active controller the caller gets NOT_CONTROLLER, which
clients retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Callable

from kcompat.broker.node_client import NodeClients, NodeConnectionError
from kcompat.broker.tls import controller_ssl
from kcompat.security.sasl_client import controller_sasl
from kcompat.kraft.controller import NewTopic, TopicResult
from kcompat.kraft import token_control
from kcompat.kraft.metadata_log import encode_record
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.create_topics import CreateTopicsRequest

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.quorum import QuorumRuntime
    from kcompat.kraft.cluster_control import ClusterControl
    from kcompat.kraft.controller import Controller

log = logging.getLogger("kcompat.kraft.controller")

FORWARD_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.05   # between attempts while the controller is unknown or moving


class ControllerService:
    """Runs controller operations of one node, or forwards them to the active controller.

    - ``context``: this node's id, config (controller listeners and their TLS/SASL,
      ``auto.leader.rebalance.enable``...), metadata image and clock (ms);
    - ``is_active()``: this node leads the metadata quorum and its image is complete;
    - ``topic_values(topic)``: the effective typed configs of ``topic`` (overrides over the broker
      defaults);
    - ``wait_for_topics(names)``: until this node's image has the topics (created through
      another node's controller).

    The KRaft ``controller`` and ``cluster_control`` (which put their records into :meth:`sink`)
    and the metadata ``quorum`` are built after this service: :meth:`attach` hands them over
    before any operation runs.
    """

    def __init__(self, context: BrokerContext, *, is_active: Callable[[], bool],
                 topic_values: Callable[[str], dict],
                 wait_for_topics: Callable[[list[str]], Awaitable[None]]) -> None:
        self.context = context
        self._is_active = is_active
        self._topic_values = topic_values
        self._wait_for_topics = wait_for_topics
        self.controller: Controller | None = None
        self.cluster_control: ClusterControl | None = None
        self.quorum: QuorumRuntime | None = None
        self._lock = asyncio.Lock()
        self._outbox: list[list] = []
        self._clients = NodeClients(self._controller_endpoint, client_id=f"kcompat-forward-{context.node_id}",
                                    ssl_context=controller_ssl(context.config),
                                    sasl=controller_sasl(context.config))
        self._next_rebalance_ms: int | None = None
        self._next_token_sweep_ms: int | None = None

    def attach(self, *, controller: Controller, cluster_control: ClusterControl, quorum: QuorumRuntime) -> None:
        """The KRaft state machines this service runs operations on, and the metadata quorum that
        commits their records (and names the active controller to forward to)."""
        self.controller = controller
        self.cluster_control = cluster_control
        self.quorum = quorum

    @property
    def active(self) -> bool:
        """This node leads the metadata quorum and its image is complete."""
        return self._is_active()

    def _controller_endpoint(self, node_id: int):
        return self.quorum.voters.get(node_id)

    # -- local execution -------------------------------------------------------------------------

    async def run(self, op: Callable[[], object]):
        """Run ``op()`` on the active controller: its records (``controller.outbox``) are committed
        and applied before the result is returned. Raises KafkaError(NOT_CONTROLLER).

        The operation runs as a task of its own that the caller's cancellation does not stop (a
        client closing its connection cancels its request handlers): the next operation must not
        start until this one's records are applied, or it would be validated against an image
        without them (two CreateTopics of one name would both pass and create the topic twice)."""
        task = asyncio.ensure_future(self._run_serially(op))
        task.add_done_callback(_retrieve)   # a caller that went away leaves its error unread
        return await asyncio.shield(task)

    async def _run_serially(self, op: Callable[[], object]):
        async with self._lock:
            if not self.active:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller")
            self._outbox = []
            try:
                result = op()
            finally:
                records = [r for change in self._outbox for r in change]
                self._outbox = []
            if records:
                await self.commit(records)
            return result

    def sink(self, records: list, now_ms: int) -> None:
        """Where the controller's operations put their records (committed by :meth:`run`)."""
        self._outbox.append(records)

    async def commit(self, records: list) -> int:
        """Commit metadata records as one batch; returns the offset of the last one."""
        now = self.context.now_ms()
        batch = rb.build_batch([(now, None, encode_record(r), ()) for r in records])
        return await self.quorum.commit(batch)

    # -- requests: local or forwarded ---------------------------------------------------------------

    async def handle(self, ctx, req, local: Callable[[], object], error_response: Callable):
        """Answer a controller request: ``local()`` (building the response, queueing records) on
        the active controller, else forward ``req`` at ``ctx.api_version``. On a controller
        listener a node that is not the active controller answers NOT_CONTROLLER instead, as
        Kafka's controllers do: the sender (another node's forwarding, :meth:`call`) finds the
        new controller itself, and a request is never passed from controller to controller."""
        if not self.active and ctx.listener_name in self.context.config.controller_listener_names:
            return error_response(req, ctx.api_version, ErrorCode.NOT_CONTROLLER)
        return await self.call(req, ctx.api_version, local, error_response)

    async def call(self, req, version: int, local: Callable[[], object], error_response: Callable,
                   timeout_s: float = FORWARD_TIMEOUT_S):
        """Run ``local()`` if this node is the active controller, else forward ``req`` to it; while
        no controller is known, the one asked is unreachable or answers NOT_CONTROLLER (an
        election is under way), try again every ``RETRY_BACKOFF_S`` until ``timeout_s`` has passed
        and only then answer NOT_CONTROLLER (Kafka's NodeToControllerRequestThread re-sends such
        requests to the new controller rather than failing them)."""
        async def attempt(remaining_s: float):
            if self.active:
                try:
                    return await self.run(local)
                except KafkaError as e:
                    if e.code != ErrorCode.NOT_CONTROLLER:
                        raise
                    return None
            return await self._forward_once(req, version, remaining_s)
        return await _retry_until_answered(attempt, lambda: error_response(req, version, ErrorCode.NOT_CONTROLLER),
                                           timeout_s)

    def on_leader_change(self, old_leader: int | None) -> None:
        """A new quorum leader: requests in flight to the old one fail now rather than at their
        timeout (a stopped controller never answers; Kafka's NodeToControllerChannelManager
        disconnects too)."""
        if old_leader is not None and old_leader != self.context.node_id:
            self._clients.close_node(old_leader)

    async def forward(self, req, version: int, error_response: Callable, timeout_s: float = FORWARD_TIMEOUT_S):
        """Send ``req`` to the active controller and return its response, retried as :meth:`call`
        does; NOT_CONTROLLER (``error_response``) once ``timeout_s`` has passed, or at once if this
        node leads the quorum (the caller asks it instead)."""
        not_controller = lambda: error_response(req, version, ErrorCode.NOT_CONTROLLER)  # noqa: E731

        async def attempt(remaining_s: float):
            if self.quorum.leader_id == self.context.node_id:
                return not_controller()
            return await self._forward_once(req, version, remaining_s)
        return await _retry_until_answered(attempt, not_controller, timeout_s)

    async def _forward_once(self, req, version: int, timeout_s: float):
        """The active controller's response to ``req``, or None to try again: no other node is
        known to lead the quorum, it could not be reached, or it answered NOT_CONTROLLER."""
        leader = self.quorum.leader_id
        if leader is None or leader == self.context.node_id:
            return None
        try:
            resp = await self._clients.send(leader, req, version, timeout_s=timeout_s)
        except (NodeConnectionError, asyncio.TimeoutError, OSError) as e:
            log.warning("forwarding %s to controller %d failed: %s", type(req).NAME, leader, e)
            return None
        return None if _answers_not_controller(resp) else resp

    # -- internal operations --------------------------------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], deadline_s: float = 30.0) -> list[TopicResult]:
        """Create topics from inside the broker (auto-creation, internal topics), retrying while the
        controller moves. Results carry Kafka error codes."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while True:
            if self.active:
                try:
                    return await self.run(lambda: self.controller.create_topics(
                        topics, validate_only=False, now_ms=self.context.now_ms()))
                except KafkaError as e:
                    if e.code != ErrorCode.NOT_CONTROLLER:
                        raise
            else:
                req = CreateTopicsRequest(timeout_ms=int(deadline_s * 1000), validate_only=False, topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                        assignments=[], configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                                 for k, v in t.configs.items()]) for t in topics])
                resp = await self._forward_once(req, 7, max(0.1, end - loop.time()))
                if resp is not None:   # else no controller (yet) or it moved: look again below
                    results = [TopicResult(r.name, ErrorCode(r.error_code), r.error_message, r.topic_id,
                                           r.num_partitions, r.replication_factor) for r in resp.topics]
                    await self._wait_for_topics([r.name for r in results if r.error == ErrorCode.NONE])
                    return results
            if loop.time() > end:
                return [TopicResult(t.name, ErrorCode.REQUEST_TIMED_OUT, "no active controller") for t in topics]
            await asyncio.sleep(0.1)

    async def fence_stale_brokers(self) -> None:
        """Active controller: fence brokers whose heartbeats stopped (broker.session.timeout.ms)."""
        if not self.active:
            return
        cc = self.cluster_control
        now = self.context.now_ms()
        if any(not b.fenced and not cc._has_session(b.broker_id, now) for b in self.context.image.brokers.values()):
            try:
                fenced = await self.run(lambda: cc.fence_stale_brokers(self.context.now_ms()))
            except KafkaError as e:
                if e.code != ErrorCode.NOT_CONTROLLER:
                    raise
                # e.g. a controller resumed after SIGSTOP sees every session expired, but its
                # quorum moved on meanwhile: the records are never committed
                log.info("not fencing brokers: %s", e.message)
                return
            if fenced:
                log.warning("fenced broker(s) %s: no heartbeat for broker.session.timeout.ms", fenced)

    async def sweep_expired_tokens(self) -> None:
        """Active controller: every ``delegation.token.expiry.check.interval.ms`` (the first one
        that long after becoming active), remove the delegation tokens past their expiry or
        maximum lifetime (KIP-48; Kafka's ``expireDelegationTokens`` periodic task, again at once
        when a pass hit its limit of 1000 tokens)."""
        settings = token_control.TokenSettings.from_config(self.context.config)
        if not self.active or not settings.enabled:
            self._next_token_sweep_ms = None
            return
        now = self.context.now_ms()
        if self._next_token_sweep_ms is None:
            self._next_token_sweep_ms = now + settings.check_interval_ms
        if now < self._next_token_sweep_ms:
            return

        def sweep():
            records = token_control.sweep_expired(self.context.image, self.context.now_ms())
            if records:
                self.controller.commit(records, self.context.now_ms())
            return len(records)
        try:
            removed = await self.run(sweep)
        except KafkaError as e:
            if e.code != ErrorCode.NOT_CONTROLLER:
                raise
            return
        more = removed >= token_control.MAX_RECORDS_PER_EXPIRATION
        self._next_token_sweep_ms = now if more else now + settings.check_interval_ms
        if removed:
            log.info("removed %d expired delegation token(s)", removed)

    # -- leader elections ------------------------------------------------------------------------------

    def unclean_election_enabled(self, topic: str) -> bool:
        """The effective ``unclean.leader.election.enable`` of ``topic``: its override, else the
        dynamic then static broker config (Kafka ``ConfigurationControlManager.
        uncleanLeaderElectionEnabledForTopic``)."""
        return bool(self._topic_values(topic)["unclean.leader.election.enable"])

    async def maybe_elect_leaders(self) -> None:
        """Active controller, every periodic tick: elect leaders for leaderless partitions of topics
        with ``unclean.leader.election.enable`` (Kafka 3.9's ``electUnclean`` task; checking every
        tick also covers the config turning true), and every
        ``leader.imbalance.check.interval.seconds`` with ``auto.leader.rebalance.enable`` move
        leadership back to preferred replicas (Kafka's ``electPreferred`` task, which in KRaft
        acts on every imbalanced partition: ``leader.imbalance.per.broker.percentage`` is not
        used). A pass that hit the per-pass limit runs again on the next tick. Never raises."""
        if not self.active:
            self._next_rebalance_ms = None
            return
        cc = self.cluster_control
        cfg = self.context.config
        try:
            n = await self.run(lambda: cc.elect_unclean_leaders(self.context.now_ms()))
            if n:
                log.warning("unclean leader election: new leaders for %d leaderless partition(s) "
                            "(unclean.leader.election.enable); records not replicated to them may be lost", n)
            now = self.context.now_ms()
            interval_ms = cfg.get("leader.imbalance.check.interval.seconds") * 1000
            if not cfg.get("auto.leader.rebalance.enable"):
                self._next_rebalance_ms = None
                return
            if self._next_rebalance_ms is None:
                self._next_rebalance_ms = now + interval_ms
            if 0 < self._next_rebalance_ms - now <= interval_ms:   # due (or the clock stepped back)
                return
            moved, more = await self.run(lambda: cc.balance_leaders(self.context.now_ms()))
            self._next_rebalance_ms = now if more else now + interval_ms
            if moved:
                log.info("auto leader rebalance: %d partition(s) led by their preferred replica again", moved)
        except asyncio.CancelledError:
            raise
        except KafkaError as e:
            log.debug("leader elections skipped: %s", e)
        except Exception:
            log.exception("periodic leader elections failed")

    def close(self) -> None:
        self._clients.close()


def _answers_not_controller(resp) -> bool:
    """Whether any ``error_code`` in the response (top level or in its entries) is NOT_CONTROLLER
    (Kafka: ``response.errorCounts().containsKey(NOT_CONTROLLER)``)."""
    for name in getattr(type(resp), "__slots__", ()):
        value = getattr(resp, name, None)
        if name == "error_code" and value == ErrorCode.NOT_CONTROLLER:
            return True
        if isinstance(value, list) and any(_answers_not_controller(item) for item in value
                                           if hasattr(type(item), "__slots__")):
            return True
    return False


async def _retry_until_answered(attempt: Callable, give_up: Callable[[], object], timeout_s: float):
    """``await attempt(remaining seconds)`` until it returns an answer (not None), every
    ``RETRY_BACKOFF_S``; ``give_up()`` once ``timeout_s`` has passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        answer = await attempt(max(0.1, deadline - loop.time()))
        if answer is not None:
            return answer
        if loop.time() + RETRY_BACKOFF_S >= deadline:
            return give_up()
        await asyncio.sleep(RETRY_BACKOFF_S)


def _retrieve(task: asyncio.Future) -> None:
    """Mark a finished operation's exception as seen: when its caller was cancelled nobody awaits
    it, and asyncio would log "Task exception was never retrieved" with a traceback at ERROR for
    what is an ordinary NOT_CONTROLLER after losing the quorum."""
    if not task.cancelled():
        task.exception()

"""The broker side of cluster membership (Kafka's ``BrokerLifecycleManager``, KIP-631).

After its metadata has caught up, a broker registers with the active controller
(BrokerRegistration: its listeners, rack and a fresh incarnation id) and heartbeats every
``broker.heartbeat.interval.ms`` with its metadata offset. The controller unfences it once that
offset reaches its registration; it serves clients only from then on. Controlled shutdown:
heartbeats with ``want_shut_down`` until the controller has moved every leadership away and
answers ``should_shut_down``. Every heartbeat names the broker's failed log dirs (KIP-858), and,
once the controller has said the broker caught up, its cordoned log dirs (v2, KIP-1066; null
before, as Kafka's lifecycle manager sends them only from the RECOVERY state on). A
STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED answer (the
controller fenced and forgot this incarnation) makes the broker register again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.broker.handlers import allocate_producer_ids, broker_heartbeat, broker_registration
from kcompat.kraft import feature_control
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from kcompat.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from kcompat.protocol.messages.broker_registration import BrokerRegistrationRequest

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.api_services import ApiServices
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.controller_service import ControllerService
    from kcompat.broker.log_dir_runtime import LogDirRuntime

log = logging.getLogger("kcompat.broker.lifecycle")

_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
RETRY_S = 0.1


class BrokerLifecycle:
    """Registration and heartbeats of one broker.

    - ``context``: this node's id, config (advertised listeners, ``broker.rack``,
      ``broker.heartbeat.interval.ms``, ``broker.session.timeout.ms``), metadata image (its offset,
      sent in heartbeats) and shutdown flag (registration stops retrying);
    - ``cluster_id``: the cluster this broker registers in;
    - ``advertised_endpoint(listener_name)``: ``(host, port)`` to register for that listener
      (bound ports filled in);
    - ``log_dir_runtime``: the online and offline log dirs' ids (KIP-858);
    - ``controller_service`` and ``api_services``: send to the active controller, or run the
      request here (with the handlers' services) on the active controller.
    """

    def __init__(self, context: BrokerContext, *, cluster_id: str,
                 advertised_endpoint: Callable[[str], tuple[str, int]], log_dir_runtime: LogDirRuntime,
                 controller_service: ControllerService, api_services: ApiServices) -> None:
        self.context = context
        self.cluster_id = cluster_id
        self.advertised_endpoint = advertised_endpoint
        self.log_dir_runtime = log_dir_runtime
        self.controller_service = controller_service
        self.api_services = api_services
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()
        self.want_shut_down = False
        self.should_shut_down = asyncio.Event()
        self.caught_up = False   # a heartbeat answer said is_caught_up (this registration)
        self._task: asyncio.Task | None = None
        self._heartbeat_due = asyncio.Event()   # heartbeat_soon(): the loop's next heartbeat is now

    def _registration(self) -> BrokerRegistrationRequest:
        cfg = self.context.config
        listeners = []
        for name, _host, _port in cfg.advertised_broker_listeners:
            host, port = self.advertised_endpoint(name)
            listeners.append(BrokerRegistrationRequest.Listener(
                name=name, host=host, port=port,
                security_protocol=_PROTOCOL_IDS.get(cfg.security_protocol(name), 0)))
        return BrokerRegistrationRequest(
            broker_id=self.context.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=listeners,
            features=[BrokerRegistrationRequest.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, (lo, hi) in sorted(feature_control.supported(self.context.image.features).items())],
            rack=cfg.get("broker.rack"), previous_broker_epoch=self.broker_epoch,
            log_dirs=self.log_dir_runtime.online_dir_ids())

    async def register(self) -> None:
        """Register (retrying until a controller accepts)."""
        cs = self.controller_service
        while not self.context.is_shutting_down():
            req = self._registration()
            resp = await cs.call(req, 4, lambda: broker_registration.local(self.api_services, req),
                                 broker_registration.error_response)
            if resp.error_code == ErrorCode.NONE:
                self.broker_epoch = resp.broker_epoch
                self.caught_up = False
                log.info("registered with the controller: broker epoch %d", self.broker_epoch)
                return
            if resp.error_code not in (ErrorCode.NOT_CONTROLLER, ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                                       ErrorCode.REQUEST_TIMED_OUT):
                log.warning("broker registration refused: %s", ErrorCode(resp.error_code).name)
            await asyncio.sleep(RETRY_S * (5 if resp.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION else 1))

    async def heartbeat(self) -> None:
        """One heartbeat; updates fencing state."""
        ctx = self.context
        req = BrokerHeartbeatRequest(broker_id=ctx.node_id, broker_epoch=self.broker_epoch,
                                     current_metadata_offset=max(ctx.image.offset, 0),
                                     want_fence=False, want_shut_down=self.want_shut_down,
                                     offline_log_dirs=self.log_dir_runtime.offline_dir_ids(),
                                     cordoned_log_dirs=self.log_dir_runtime.cordoned_dir_ids() if self.caught_up else None)
        # a heartbeat stuck on an unresponsive controller must not outlive the session
        timeout_s = max(0.5, ctx.config.get("broker.session.timeout.ms") / 3000.0)
        broker_heartbeat.touch_session(self.api_services, req)
        resp = await self.controller_service.call(req, 2, lambda: broker_heartbeat.local(self.api_services, req),
                                                  broker_heartbeat.error_response, timeout_s=timeout_s)
        if resp.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.warning("the controller no longer knows this broker epoch (%s): registering again",
                        ErrorCode(resp.error_code).name)
            self._set_fenced(True)
            await self.register()
            return
        if resp.error_code != ErrorCode.NONE:
            return
        if resp.is_caught_up and not self.caught_up:
            self.caught_up = True   # from now on heartbeats carry the cordoned dirs: send them now
            self.heartbeat_soon()
        self._set_fenced(resp.is_fenced)
        if resp.should_shut_down:
            self.should_shut_down.set()

    def _set_fenced(self, fenced: bool) -> None:
        if fenced != self.fenced:
            log.info("broker %d is %s", self.context.node_id, "fenced" if fenced else "unfenced")
        self.fenced = fenced
        if fenced:
            self.unfenced.clear()
        else:
            self.unfenced.set()

    def heartbeat_soon(self) -> None:
        """Have the heartbeat loop send its next heartbeat now rather than after the interval: the
        controller should learn a change at once (a failed or cordoned log dir, Kafka's
        ``BrokerLifecycleManager.propagateDirectoryFailure``). Heartbeats stay one at a time."""
        self._heartbeat_due.set()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await self.register()
        interval = self.context.config.get("broker.heartbeat.interval.ms") / 1000.0
        while True:
            try:
                await self.heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker heartbeat failed")
            # heartbeat quickly while fenced or shutting down, as Kafka's lifecycle manager does
            try:
                await asyncio.wait_for(self._heartbeat_due.wait(),
                                       RETRY_S if (self.fenced or self.want_shut_down) else interval)
            except asyncio.TimeoutError:
                pass
            self._heartbeat_due.clear()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True once it says to shut down."""
        self.want_shut_down = True
        try:
            await asyncio.wait_for(self.should_shut_down.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A new producer id block from the controller. Raises KafkaError."""
        req = AllocateProducerIdsRequest(broker_id=self.context.node_id, broker_epoch=self.broker_epoch)
        resp = await self.controller_service.call(
            req, 0, lambda: allocate_producer_ids.local(self.api_services, req), allocate_producer_ids.error_response)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code), "could not allocate a producer id block")
        return resp.producer_id_start, resp.producer_id_len

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

"""The consumer instances of one HTTP listener (the REST Proxy's v2 consumer API): a registry by
(group, instance name) and a reaper that closes instances idle for ``consumer.instance.timeout.ms``
(Confluent REST Proxy's setting; the instance leaves its group). See
:mod:`kcompat.broker.http.rest_consumer` for an instance itself."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kcompat.broker.http.rest_common import RestError
from kcompat.broker.http.rest_consumer import LEAVE_TIMEOUT_S, ConsumerInstance

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http.rest")


class ConsumerManager:
    """The consumer instances of one HTTP listener, by (group, name), and the reaper that closes
    those idle for ``consumer.instance.timeout.ms``."""

    def __init__(self, services: HttpServices) -> None:
        self.services = services
        self.instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._reaper: asyncio.Task | None = None

    def timeout_s(self) -> float:
        """``consumer.instance.timeout.ms``, in seconds."""
        return int(self.services.config.get("consumer.instance.timeout.ms")) / 1000.0

    def add(self, inst: ConsumerInstance) -> None:
        """Keep ``inst`` (the caller checked its name is free)."""
        self.instances[(inst.group, inst.name)] = inst
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())

    def get(self, group: str, name: str) -> ConsumerInstance:
        """The instance, marked used; 404 40403 "Consumer instance not found." if there is none."""
        inst = self.instances.get((group, name))
        if inst is None or inst.closed:
            raise RestError(404, 40403, "Consumer instance not found.")
        inst.touch()
        return inst

    async def remove(self, group: str, name: str) -> None:
        """Close and forget an instance (404 40403 if there is none)."""
        inst = self.get(group, name)
        self.instances.pop((group, name), None)
        await inst.close()

    async def _reap(self) -> None:
        loop = asyncio.get_running_loop()
        while self.instances:
            timeout = self.timeout_s()
            await asyncio.sleep(min(1.0, max(0.05, timeout / 4)))
            now = loop.time()
            for key, inst in list(self.instances.items()):
                if now - inst.last_used >= timeout and not inst.reading.locked():
                    log.info("closing consumer instance %s of group %s: idle for %.0f ms "
                             "(consumer.instance.timeout.ms)", inst.name, inst.group, timeout * 1000)
                    self.instances.pop(key, None)
                    try:
                        await inst.close()
                    except Exception:
                        log.exception("closing consumer instance %s failed", inst.name)

    async def close(self) -> None:
        """Close every instance (the listener is stopping)."""
        if self._reaper is not None:
            self._reaper.cancel()
        instances, self.instances = list(self.instances.values()), {}
        if instances:
            await asyncio.gather(*(asyncio.wait_for(i.close(), 2 * LEAVE_TIMEOUT_S + 1) for i in instances),
                                 return_exceptions=True)

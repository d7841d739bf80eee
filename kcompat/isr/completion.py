"""A delayed operation's result, handed over on the spot, as Kafka's purgatory does.

Kafka completes a waiting fetch inside the operation that made it answerable:
``ReplicaManager.appendRecords`` ends with ``tryCompleteDelayedRequests``, whose
``DelayedOperation.forceComplete`` runs ``onComplete``, and that sends the fetch's response, all
on the appending thread. An asyncio future instead hands its result to its callbacks on the loop's
next turn. So the producer's acknowledgement would be written first, and a long-polling
consumer's end-to-end latency would wait behind it. :class:`Completion` calls its callbacks while
the completer is still running. :class:`kcompat.isr.fetch_messages.DelayedFetch` answers through
one, and the connection (``kcompat.broker.connection``) writes the response from that callback.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

log = logging.getLogger(__name__)

Callback = Callable[[Any, "BaseException | None"], None]


class Completion:
    """A result that arrives later. It is passed to its callbacks synchronously, by whatever code
    completes it.

    - Each callback ``fn(value, error)`` is called exactly once: when the result is set, or at
      once if it is already set. The completer is busy with some other request, so an exception
      raised by a callback is logged and goes no further.
    - :meth:`cancel` is for a waiter that went away (its connection closed). The ``on_cancel``
      hook runs, for example to stop watching partitions, and the callbacks are dropped.
    - :meth:`map` derives the completion of ``fn(value)``. Cancelling the derived one cancels
      this one.
    - ``await completion`` waits for it on the running loop. It raises the error, or
      ``asyncio.CancelledError`` if the completion was cancelled.
    """

    __slots__ = ("_callbacks", "_done", "_cancelled", "_value", "_error", "_on_cancel")

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self._callbacks: list[Callback] = []
        self._done = False
        self._cancelled = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._on_cancel = on_cancel

    @property
    def done(self) -> bool:
        """Set, failed or cancelled."""
        return self._done

    def add_callback(self, fn: Callback) -> None:
        if self._done:
            if not self._cancelled:
                self._call(fn)
            return
        self._callbacks.append(fn)

    def set_result(self, value: Any) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(None, error)

    def cancel(self) -> None:
        """The waiter is gone: drop the callbacks and run ``on_cancel`` (once; no-op when done)."""
        if self._done:
            return
        self._done = self._cancelled = True
        self._callbacks = []
        hook, self._on_cancel = self._on_cancel, None
        if hook is not None:
            hook()

    def map(self, fn: Callable[[Any], Any]) -> "Completion":
        """The completion of ``fn(value)``: an error, or an exception raised by ``fn``, fails it."""
        derived = Completion(on_cancel=self.cancel)

        def relay(value, error) -> None:
            if error is not None:
                derived.set_exception(error)
                return
            try:
                mapped = fn(value)
            except Exception as e:   # noqa: BLE001 - the derived completion carries it
                derived.set_exception(e)
                return
            derived.set_result(mapped)

        self.add_callback(relay)
        return derived

    def __await__(self):
        if not self._done:
            future = asyncio.get_running_loop().create_future()

            def relay(value, error) -> None:
                if future.done():
                    return
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(value)

            self.add_callback(relay)
            try:
                return (yield from future.__await__())
            except asyncio.CancelledError:
                self.cancel()
                raise
        if self._cancelled:
            raise asyncio.CancelledError()
        if self._error is not None:
            raise self._error
        return self._value

    def _finish(self, value: Any, error: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        self._value, self._error = value, error
        self._on_cancel = None
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn: Callback) -> None:
        try:
            fn(self._value, self._error)
        except Exception:   # noqa: BLE001 - the completer is handling another request
            log.exception("a completion callback failed")

"""What the broker's own components (replica fetchers, ISR updates, tiered storage, the share
persister, log dirs, registration and heartbeats, the controller service, the metadata publisher)
all read of their broker, instead of the broker itself (as the coordinators get
:class:`~kcompat.broker.coordinator_runtime.CoordinatorServices` and the handlers
:class:`~kcompat.broker.api_services.ApiServices`).

Each of them also takes, as its own constructor arguments, the few other collaborators it uses
(the replication quotas, the controller service, the replica manager...): see their docstrings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.config.broker import BrokerConfig
    from kcompat.kraft.image import MetadataImage


@dataclass(frozen=True, eq=False, slots=True)
class BrokerContext:
    """This node's id, its config, its metadata image, its clock and its shutdown flag.

    - ``node_id``: this broker's ``node.id``;
    - ``config``: the :class:`~kcompat.config.broker.BrokerConfig` (static and dynamic configs);
    - ``image``: the :class:`~kcompat.kraft.image.MetadataImage`, which metadata replay updates
      in place (so it is always current);
    - ``now_ms()``: the broker's wall clock, ms since the epoch;
    - ``is_shutting_down()``: True once :meth:`kcompat.broker.broker.Broker.stop` has begun
      shutting down (loops end at their next turn).
    """

    node_id: int
    config: BrokerConfig
    image: MetadataImage
    now_ms: Callable[[], int]
    is_shutting_down: Callable[[], bool]

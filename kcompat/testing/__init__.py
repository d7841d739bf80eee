"""kcompat for test suites: real Kafka-compatible brokers that start in a fraction of a second.

- :class:`Broker` / :class:`Cluster` (:mod:`kcompat.testing.embedded`): context managers for any
  code, ``with Broker() as b: produce(b.bootstrap_servers)``.
- The pytest plugin (:mod:`kcompat.testing.plugin`, registered through the ``pytest11`` entry
  point): fixtures ``kafka_broker``, ``kafka_cluster``, ``kafka_topic``, ``kafka_topic_factory``.
- :mod:`kcompat.testing.admin`: blocking topic and group admin over the Kafka protocol, for any
  Kafka client (or none).

Importing this package is cheap: the broker itself is imported only by an in-process broker.
"""

from __future__ import annotations

__all__ = ["Broker", "Cluster"]


def __getattr__(name: str):
    if name in __all__:
        from kcompat.testing import embedded
        return getattr(embedded, name)
    raise AttributeError(f"module 'kcompat.testing' has no attribute {name!r}")

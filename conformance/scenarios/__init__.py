"""Scenario modules, by area. Importing this package registers every scenario.

- :mod:`.api` — ApiVersions (incl. KIP-511), version negotiation, Metadata;
- :mod:`.probes` — malformed and hostile input that must leave the broker serving;
- :mod:`.topics` — topic and config administration, DeleteRecords, DescribeCluster;
- :mod:`.produce` — every codec x acks level, size limits;
- :mod:`.fetch` — from offsets, inside batches, headers/timestamps, LogAppendTime, long polls;
- :mod:`.list_offsets` — earliest/latest, by timestamp, max timestamp;
- :mod:`.groups` — consumer groups: commit/resume, rebalances, cooperative, static members, admin;
- :mod:`.idempotence` — sequence semantics and idempotent producers through connection faults;
- :mod:`.transactions` — commit/abort with read_committed, fencing, offsets in transactions, the
  Java TransactionalMessageCopier;
- :mod:`.verifiable` — Java VerifiableProducer/VerifiableConsumer loss and duplicate checks, also
  through broker restarts;
- :mod:`.perf` — the ``perf`` group: ProducerPerformance, ConsumerPerformance, EndToEndLatency;
- :mod:`.security` — the opt-in ``security`` group: SSL, SASL PLAIN/SCRAM and ACLs;
- :mod:`.eco_streams`, :mod:`.eco_connect`, :mod:`.eco_mirror` — the opt-in ``ecosystem`` group:
  Kafka Streams, Kafka Connect and MirrorMaker 2 of Kafka 3.9.1 and 4.3.1 (their Java drivers in
  ``java/``).
"""

# Registration order is report order: from the handshake up to transactions and performance.
from conformance.scenarios import api  # noqa: F401
from conformance.scenarios import probes  # noqa: F401
from conformance.scenarios import topics  # noqa: F401
from conformance.scenarios import produce  # noqa: F401
from conformance.scenarios import fetch  # noqa: F401
from conformance.scenarios import list_offsets  # noqa: F401
from conformance.scenarios import groups  # noqa: F401
from conformance.scenarios import idempotence  # noqa: F401
from conformance.scenarios import transactions  # noqa: F401
from conformance.scenarios import verifiable  # noqa: F401
from conformance.scenarios import perf  # noqa: F401
from conformance.scenarios import security  # noqa: F401
from conformance.scenarios import eco_streams  # noqa: F401
from conformance.scenarios import eco_connect  # noqa: F401
from conformance.scenarios import eco_mirror  # noqa: F401

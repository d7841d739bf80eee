"""kcompat conformance suite: real Kafka clients against any Kafka-compatible bootstrap address.

Run ``python -m conformance --help``. The suite drives named, independent scenarios through several
client implementations (kafka-python, confluent-kafka/librdkafka, the Java kafka-clients through
Apache Kafka's own tools, kcat, and raw wire probes), optionally side by side with a real Apache
Kafka broker it downloads and starts itself, and writes JSON, Markdown and HTML reports.

Module map:

- :mod:`conformance.cli` — command line, orchestration of targets;
- :mod:`conformance.runner` / :mod:`conformance.worker` — running cases with hard timeouts;
- :mod:`conformance.registry` / :mod:`conformance.model` / :mod:`conformance.context` — scenarios,
  cases, results and what a scenario gets to work with;
- :mod:`conformance.clients` — one driver module per client;
- :mod:`conformance.scenarios` — scenario modules by area;
- :mod:`conformance.targets` / :mod:`conformance.reference` / :mod:`conformance.maven` — brokers
  under test, the reference Kafka broker and the Maven resolver for Kafka's jars;
- :mod:`conformance.wire` / :mod:`conformance.faultproxy` — raw protocol access and a
  fault-injecting, address-rewriting proxy;
- :mod:`conformance.report` — JSON, Markdown and HTML writers.
"""

SUITE_VERSION = "1.0"
KAFKA_VERSION = "3.9.2"  # Apache Kafka release used for the Java tools and the reference broker

"""Command line: ``kcompat serve [--config server.properties] [--override key=value ...]``, and
``kcompat container`` / ``kcompat healthcheck`` for the container image (:mod:`kcompat.container`).

Like ``kafka-server-start.sh``: a Kafka ``server.properties`` file plus ``--override`` pairs, with
Kafka's configuration names and defaults. With no configuration at all it starts a single-node
broker + controller on 127.0.0.1:9092 with its data in ``./kcompat-data``. An unknown key or an
invalid value prints an error naming the key and exits with status 2. A log directory that cannot
be used (what Kafka fails a log dir for: a malformed checkpoint file, a damaged metadata snapshot or
quorum state, another cluster's meta.properties) is logged naming the file, with exit status 1.
SIGTERM and SIGINT shut the broker down cleanly (in-flight requests answered, logs flushed and
closed).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

EXIT_CONFIG_ERROR = 2
EXIT_STORAGE_ERROR = 1   # a log dir that cannot be used; also the status of a halt (Kafka Exit.halt(1))


class _Formatter(logging.Formatter):
    """One line per event: ISO-8601 UTC time, level, logger, message."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created))
        line = f"{ts}.{int(record.msecs):03d}Z {record.levelname} {record.name} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcompat", description="A Kafka-wire-compatible message broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker (single node by default)")
    serve.add_argument("--config", "-c", metavar="server.properties", help="Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="key=value",
                       help="override a configuration value (repeatable)")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument("--cluster-id", metavar="ID",
                       help="cluster id for new (unformatted) log directories, the same on every node of a "
                            "cluster (as kafka-storage format --cluster-id); existing directories must match")
    sub.add_parser("random-uuid", help="print a new cluster id (as kafka-storage random-uuid)")
    container = sub.add_parser("container", help="run a node configured by KAFKA_* environment variables and "
                                                 "CLUSTER_ID, as the apache/kafka image (the kcompat image's entry point)")
    container.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    health = sub.add_parser("healthcheck", help="exit 0 if the node answers an ApiVersions request, else 1")
    health.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="address to check (default: the first client listener of the KAFKA_* environment)")
    health.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS")
    return parser


async def _serve(config, cluster_id: str | None = None) -> int:
    from kcompat.broker.broker import Broker
    from kcompat.broker.malloc_tuning import tune_malloc
    from kcompat.log import LogError

    tune_malloc()   # large request buffers stay in the heap (see kcompat.broker.malloc_tuning)
    broker = Broker(config, cluster_id=cluster_id)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
    try:
        await broker.start()
    except (LogError, OSError) as e:   # a log dir Kafka would fail (malformed checkpoint, damaged
        # snapshot...), or one that cannot be written (a full disk), or a port already in use
        logging.getLogger("kcompat").critical("cannot start: %s", e)
        return EXIT_STORAGE_ERROR
    await broker.stopped.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "random-uuid":
        from kcompat.broker.cluster_id import new_cluster_id
        print(new_cluster_id())
        return 0
    if args.command == "healthcheck":
        return _healthcheck(args)
    setup_logging(args.log_level)
    from kcompat.config import BrokerConfig, ConfigError

    cluster_id = getattr(args, "cluster_id", None)
    try:
        if args.command == "container":
            from kcompat.container import ContainerConfigError, load_config
            try:
                config, cluster_id = load_config(os.environ)
            except ContainerConfigError as e:
                print(f"kcompat: invalid configuration: {e}", file=sys.stderr)
                return EXIT_CONFIG_ERROR
        else:
            config = BrokerConfig.load(args.config, args.override)
    except ConfigError as e:
        print(f"kcompat: invalid configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except OSError as e:
        print(f"kcompat: cannot read configuration file: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:   # TLS listeners' key and trust stores are read now, as Kafka's SslFactory does at start-up
        from kcompat.security.ssl_context import validate_listeners
        validate_listeners(config)
    except ConfigError as e:
        print(f"kcompat: invalid configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(_serve(config, cluster_id))
    return uvloop.run(_serve(config, cluster_id))


def _healthcheck(args) -> int:
    from kcompat.container import ContainerConfigError, healthcheck

    try:
        status, message = healthcheck(os.environ, args.bootstrap, args.timeout)
    except (ContainerConfigError, ValueError) as e:
        status, message = 1, f"unhealthy: {e}"
    print(message, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())

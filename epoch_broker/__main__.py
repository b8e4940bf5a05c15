"""`epoch-broker serve [server.properties] [--override key=value ...]`: run one broker (with its controller).
`epoch-broker cluster ...` starts a controller and N brokers (drill/launcher.py); `epoch-broker admin ...`
drives them (drill/admin.py); `epoch-broker drill SCENARIO ...` runs a failover drill and checks it
(drill/runner.py).

Prints one ready line to stdout once the broker answers requests:
    epoch-broker: node 0 listening on 127.0.0.1:9092
A bad config value, or an environment it cannot start in (a port in use, an unwritable data dir, too few file
descriptors), exits with status 2 and one line naming it. SIGTERM/SIGINT stop the broker cleanly
(exit 0). Logs go to stderr, as text or (`log.format=json`) one JSON object a line: epoch_broker/logs.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import signal
import sys
from typing import Any

from epoch_broker import __version__, logs
from epoch_broker.broker import events
from epoch_broker.broker.config import BrokerConfig, ConfigError, StartupError, load_config

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="epoch-broker", description="A Kafka-compatible broker.")
    parser.add_argument("--version", action="version", version=f"epoch-broker {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker (and its embedded controller)")
    serve.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key (repeatable; wins over the file)")
    serve.add_argument("--log-level", default="INFO", help=", ".join(LOG_LEVELS))
    cluster = commands.add_parser("cluster", help="run a controller and N brokers as processes")
    if argv[:1] == ["cluster"]:  # its options need the launcher, imported only then (it slows `serve`'s start)
        from epoch_broker.drill import launcher

        launcher.add_arguments(cluster)
    # listed for --help only: main() hands `admin ...` to broker.admin's own parser
    commands.add_parser("admin", help="elections, fault hooks, signals and status of a cluster", add_help=False)
    commands.add_parser("drill", help="a failover drill: cluster, clients, seeded faults, checker, report",
                        add_help=False)
    return parser.parse_args(argv)


async def _serve(config: BrokerConfig) -> None:
    # Imported after the config is known good: keeps `--help` and bad configs fast.
    if config.process_roles == {"controller"}:
        from epoch_broker.broker.controller.server import ControllerServer

        broker: Any = ControllerServer(config)
    else:
        from epoch_broker.broker.app import Broker

        broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        endpoint = await broker.start()
    except OSError as exc:  # a port in use, an unwritable data dir: the message names it
        with contextlib.suppress(Exception):
            await broker.stop()
        raise StartupError(f"cannot start: {exc}") from exc
    # Everything made at start (modules, protocol schemas, loaded indexes) lives as long as the process: out of
    # the collector's sight, a full collection walks only what came since: 0.5 ms instead of 20-50 ms pauses
    # that every request in flight waited out (the tail of acks=all latency).
    gc.freeze()
    print(f"epoch-broker: node {config.node_id} listening on {endpoint.host}:{endpoint.port}", flush=True)
    await stop.wait()
    await broker.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["admin"]:  # its client and protocol imports stay out of `serve`'s start and `--help`
        from epoch_broker.drill import admin

        return admin.main(argv[1:])
    if argv[:1] == ["drill"]:  # it needs confluent-kafka (the [drill] extra): imported only when asked for
        from epoch_broker.drill import runner

        return runner.main(argv[1:])
    args = _parse_args(argv)
    if args.command == "cluster":
        from epoch_broker.drill import launcher

        return launcher.run(args)
    if args.log_level.upper() not in LOG_LEVELS:
        print(f"epoch-broker: unknown --log-level {args.log_level!r} (one of {', '.join(LOG_LEVELS)})",
              file=sys.stderr)
        return 2
    logs.setup(args.log_level.upper())  # text until the config says otherwise: its warnings are logged too
    try:
        config = load_config(args.properties, args.override)
    except (ConfigError, OSError) as exc:
        print(f"epoch-broker: {exc}", file=sys.stderr)
        return 2
    logs.use_format(config.log_format, config.node_id)
    events.set_node(config.node_id)
    try:
        import uvloop
    except ImportError:
        run: Any = asyncio.run
    else:
        run = uvloop.run
    try:
        run(_serve(config))
    except StartupError as exc:
        print(f"epoch-broker: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

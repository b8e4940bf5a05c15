"""`epoch-broker admin [--cluster DIR | --bootstrap HOST:PORT] <command>`: drive a cluster during a drill.

- `elect`: ElectLeaders v2 to the controller (clean, or `--unclean`; `--leader` names the target with the
  project's tagged `target_leader`).
- `fault`: IncrementalAlterConfigs v1 on the broker resource (type 4) of one node, sent to that node: the
  fault hooks of broker/faults.py. `fault.power.loss` makes the broker exit without answering, so a closed
  connection is its success.
- `reassign --replicas 0,1,3 | --cancel`, `reassignments`: AlterPartitionReassignments and
  ListPartitionReassignments v0 to the controller (KIP-455: replace a dead broker, move a partition off one).
- `remove-broker`: UnregisterBroker v0 to the controller, for a broker that is gone for good.
- `kill`, `pause`, `resume`, `restart`: signals by the pids in DIR/cluster.json (drill/launcher.py's code).
- `status [--json] [--watch S]`: every process, whether it runs and the fault hooks set on it (DescribeConfigs
  of its broker resource), the controller by its process, then each partition's leader, leader epoch and ISR
  from a Metadata request; as one JSON document per line with --json, again every S seconds with --watch.
  With controllers in ZooKeeper, the active one and its controller epoch as ZooKeeper has them (`/controller`,
  `/controller_epoch`).
- The controller's commands go to the active controller: the first running one that does not answer
  NOT_CONTROLLER (`active_controller`).

The request helpers (`elect`, `reassign`, `reassignments`, `remove_broker`, `alter_faults`, `fetch_metadata`,
`transaction_coordinator`, `group_coordinator`) are what the cluster tests and the drills' nemesis use too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epoch_broker.broker import faults
from epoch_broker.broker.config import DYNAMIC_BROKER_CONFIG
from epoch_broker.broker.faults import POWER_LOSS
from epoch_broker.client.aio import ConnectionClosed, KafkaClient
from epoch_broker.drill import launcher
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    alter_partition_reassignments,
    describe_cluster,
    describe_configs,
    elect_leaders,
    find_coordinator,
    incremental_alter_configs,
    list_partition_reassignments,
    metadata,
    unregister_broker,
)

REQUEST_TIMEOUT_S = 5.0  # a paused (SIGSTOP) process accepts connections but never answers
BROKER_RESOURCE = 4
SET, DELETE = 0, 1
CLEAN, UNCLEAN = 0, 1
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types: a group id, a transactional id
DEFAULT_CLUSTER_DIR = "cluster-data"


class AdminError(RuntimeError):
    """A request failed; the message is the one line shown to the user."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class ClusterMetadata:
    source: str  # the address that answered
    controller_id: int
    brokers: dict[int, str]
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)


async def _call(address: str, timeout_s: float, work: Any) -> Any:
    """Connect to `address`, run `work(client)`, close; connection problems become AdminError."""
    async def session() -> Any:
        async with await KafkaClient.connect(address, client_id="epoch-broker-admin") as client:
            return await work(client)

    try:
        return await asyncio.wait_for(session(), timeout_s)
    except TimeoutError:
        raise AdminError(f"{address} did not answer within {timeout_s:.0f} s") from None
    except ConnectionClosed as exc:
        raise AdminError(f"{address} closed the connection ({exc})") from None
    except OSError as exc:
        raise AdminError(f"cannot reach {address}: {exc.strerror or exc}") from None


def _error(code: int, message: str | None) -> str:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


async def elect(controller: str, topic: str, partition: int, leader: int = -1, unclean: bool = False,
                timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """Elect a leader for one partition; returns "elected" or "not needed", raises AdminError otherwise."""
    request = elect_leaders.REQUEST.cls(
        election_type=UNCLEAN if unclean else CLEAN, timeout_ms=int(timeout_s * 1000), target_leader=leader,
        topic_partitions=[elect_leaders.REQUEST.TopicPartitions(topic=topic, partitions=[partition])])
    response = await _call(controller, timeout_s,
                           lambda client: client.request(elect_leaders.API, 2, request))
    if response.error_code:
        raise AdminError(_error(response.error_code, None))
    for result in response.replica_election_results:
        for answer in result.partition_result:
            if answer.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                return "not needed"
            if answer.error_code:
                raise AdminError(_error(answer.error_code, answer.error_message))
    return "elected"


async def reassign(controller: str, topic: str, partition: int, replicas: list[int] | None,
                   timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """Start (replicas) or cancel (None) a reassignment (AlterPartitionReassignments); returns "started" or
    "cancelled", raises AdminError otherwise."""
    R = alter_partition_reassignments.REQUEST
    request = R.cls(timeout_ms=int(timeout_s * 1000), topics=[R.ReassignableTopic(name=topic, partitions=[
        R.ReassignablePartition(partition_index=partition, replicas=replicas)])])
    response = await _call(controller, timeout_s,
                           lambda client: client.request(alter_partition_reassignments.API, 0, request))
    if response.error_code:
        raise AdminError(_error(response.error_code, response.error_message))
    for result in response.responses:
        for answer in result.partitions:
            if answer.error_code:
                raise AdminError(_error(answer.error_code, answer.error_message))
    return "started" if replicas is not None else "cancelled"


async def reassignments(controller: str, timeout_s: float = REQUEST_TIMEOUT_S
                        ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    """(topic, partition, replicas, adding, removing) of every reassignment in progress."""
    request = list_partition_reassignments.REQUEST.cls(timeout_ms=int(timeout_s * 1000), topics=None)
    response = await _call(controller, timeout_s,
                           lambda client: client.request(list_partition_reassignments.API, 0, request))
    if response.error_code:
        raise AdminError(_error(response.error_code, response.error_message))
    return [(topic.name, p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for topic in response.topics for p in topic.partitions]


async def remove_broker(controller: str, node_id: int, timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """UnregisterBroker: a broker gone for good leaves the cluster metadata."""
    response = await _call(controller, timeout_s, lambda client: client.request(
        unregister_broker.API, 0, unregister_broker.REQUEST.cls(broker_id=node_id)))
    if response.error_code:
        raise AdminError(_error(response.error_code, response.error_message))
    return "removed"


async def alter_faults(address: str, node_id: int, settings: dict[str, str], clear: list[str] | None = None,
                       timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """Set and clear fault hooks of node `node_id` at `address`; returns "applied" or, after
    fault.power.loss, "connection closed" (the broker exits without answering)."""
    configs = [incremental_alter_configs.REQUEST.AlterableConfig(name=k, config_operation=SET, value=v)
               for k, v in settings.items()]
    configs += [incremental_alter_configs.REQUEST.AlterableConfig(name=k, config_operation=DELETE, value=None)
                for k in clear or []]
    request = incremental_alter_configs.REQUEST.cls(validate_only=False, resources=[
        incremental_alter_configs.REQUEST.AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=str(node_id), configs=configs)])
    try:
        response = await _call(address, timeout_s,
                               lambda client: client.request(incremental_alter_configs.API, 1, request))
    except AdminError:
        if POWER_LOSS in settings:
            return "connection closed"
        raise
    for resource in response.responses:
        if resource.error_code:
            raise AdminError(_error(resource.error_code, resource.error_message))
    return "applied"


async def transaction_coordinator(addresses: list[str], transactional_id: str,
                                  timeout_s: float = REQUEST_TIMEOUT_S) -> int:
    """The node coordinating `transactional_id` (FindCoordinator, key type 1), as the first broker that answers
    knows it; AdminError if none answers or none is known."""
    return await _coordinator(addresses, TRANSACTION_KEY, transactional_id, "transactional id", timeout_s)


async def group_coordinator(addresses: list[str], group_id: str, timeout_s: float = REQUEST_TIMEOUT_S) -> int:
    """The node coordinating consumer group `group_id` (FindCoordinator, key type 0: the leader of the group's
    `__consumer_offsets` partition), as the first broker that answers knows it; AdminError if none answers or
    none is known."""
    return await _coordinator(addresses, GROUP_KEY, group_id, "group", timeout_s)


async def _coordinator(addresses: list[str], key_type: int, key: str, what: str, timeout_s: float) -> int:
    request = find_coordinator.REQUEST.cls(key_type=key_type, coordinator_keys=[key])
    problems = []
    for address in addresses:
        try:
            response = await _call(address, timeout_s,
                                   lambda client: client.request(find_coordinator.API, 4, request))
        except AdminError as exc:
            problems.append(str(exc))
            continue
        (answer,) = response.coordinators
        if answer.error_code == ErrorCode.NONE:
            return answer.node_id
        problems.append(f"{address}: {_error(answer.error_code, answer.error_message)}")
    raise AdminError(f"no coordinator known for {what} {key!r}: " + "; ".join(problems))


async def fetch_metadata(addresses: list[str], timeout_s: float = REQUEST_TIMEOUT_S) -> ClusterMetadata:
    """Metadata for every topic from the first of `addresses` that answers, at the newest version both serve (a
    broker claiming Kafka 2.8 has up to v11)."""
    request = metadata.REQUEST.cls(topics=None, allow_auto_topic_creation=False)

    async def ask(client: KafkaClient) -> Any:
        await client.negotiate()
        return await client.request(metadata.API, client.version_for(metadata.API), request)

    problems = []
    for address in addresses:
        try:
            response = await _call(address, timeout_s, ask)
        except AdminError as exc:
            problems.append(str(exc))
            continue
        return ClusterMetadata(
            address, response.controller_id, {b.node_id: f"{b.host}:{b.port}" for b in response.brokers},
            {(t.name, p.partition_index): PartitionState(p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                                                         tuple(p.isr_nodes))
             for t in response.topics for p in t.partitions})
    raise AdminError("no broker answered Metadata" + (": " + "; ".join(problems) if problems else " (none running)"))


async def active_controller(cluster: launcher.ClusterFile, timeout_s: float = REQUEST_TIMEOUT_S) -> str:
    """The address of the controller acting now: with one controller, it; with several (ZooKeeper), the first
    running one whose DescribeCluster is not answered NOT_CONTROLLER."""
    if len(cluster.controllers) == 1:
        return cluster.controller.address
    request = describe_cluster.REQUEST.cls()
    for spec in cluster.controllers:
        if not launcher.is_running(spec):
            continue
        try:
            response = await _call(spec.address, timeout_s,
                                   lambda client: client.request(describe_cluster.API, 0, request))
        except AdminError:
            continue
        if response.error_code == ErrorCode.NONE:
            return spec.address
    raise AdminError("no controller is active (a failover takes up to zookeeper.session.timeout.ms)")


def zookeeper_controller(cluster: launcher.ClusterFile) -> dict[str, Any] | None:
    """{"node_id", "controller_epoch"} as ZooKeeper has them, or None when the controllers keep their metadata
    in files; node_id -1 when none is elected."""
    connect = next((argument.partition("=")[2] for argument in cluster.controller.argv
                    if argument.startswith("zookeeper.connect=")), "")
    if not connect:
        return None
    from kazoo.client import KazooClient  # the admin CLI imports it only for a cluster that uses ZooKeeper
    from kazoo.exceptions import NoNodeError

    hosts, _, chroot = connect.partition("/")
    client = KazooClient(hosts=hosts)
    try:
        client.start(timeout=REQUEST_TIMEOUT_S)
        root = f"/{chroot.strip('/')}" if chroot.strip("/") else ""
        try:
            node_id = json.loads(client.get(f"{root}/controller")[0])["brokerid"]
        except NoNodeError:
            node_id = -1
        try:
            epoch = int(client.get(f"{root}/controller_epoch")[0])
        except NoNodeError:
            epoch = 0
    except Exception as exc:  # kazoo's timeout and connection errors share no base class
        raise AdminError(f"ZooKeeper at {connect}: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        client.stop()
        client.close()
    return {"node_id": node_id, "controller_epoch": epoch}


def running_brokers(cluster: launcher.ClusterFile) -> list[str]:
    """Addresses of the brokers that can answer (not dead, not paused: those would only time out)."""
    return [spec.address for spec in cluster.brokers if launcher.process_state(spec) == "running"]


# --- the `admin` command ----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", metavar="DIR",
                        help=f"the launcher's data dir holding cluster.json (default ./{DEFAULT_CLUSTER_DIR})")
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="talk to this address instead of the ones in cluster.json")
    commands = parser.add_subparsers(dest="admin_command", required=True)
    elect_cmd = commands.add_parser("elect", help="elect a partition leader (ElectLeaders, to the controller)")
    elect_cmd.add_argument("--topic", required=True)
    elect_cmd.add_argument("--partition", type=int, required=True)
    elect_cmd.add_argument("--leader", type=int, default=-1,
                           help="the replica to elect (default: the controller's choice)")
    elect_cmd.add_argument("--unclean", action="store_true", help="any live replica, even out of the ISR")
    fault = commands.add_parser(
        "fault", help="set or clear a broker's fault hooks (broker/faults.py)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Set (--set KEY=VALUE) or clear (--clear KEY) fault hooks of one node, with "
                    "IncrementalAlterConfigs.\n\nThe catalogue:\n" + faults.describe())
    fault.add_argument("--node", type=int, required=True)
    fault.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    fault.add_argument("--clear", action="append", default=[], metavar="KEY")
    kill = commands.add_parser("kill", help="signal a process (SIGKILL by default)")
    kill.add_argument("--node", type=int, required=True)
    kill.add_argument("--signal", choices=("KILL", "TERM"), default="KILL")
    for name, description in (("pause", "SIGSTOP a process"), ("resume", "SIGCONT a paused process")):
        commands.add_parser(name, help=description).add_argument("--node", type=int, required=True)
    restart = commands.add_parser("restart", help="stop a process and start it again with its recorded argv")
    restart.add_argument("--node", type=int, required=True)
    restart.add_argument("--hard", action="store_true", help="SIGKILL instead of a clean stop")
    status_cmd = commands.add_parser("status", help="processes, their fault hooks, and each partition's leader, "
                                                    "epoch and ISR")
    status_cmd.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    status_cmd.add_argument("--watch", type=float, default=None, metavar="SECONDS",
                            help="print it again every SECONDS until interrupted")
    reassign_cmd = commands.add_parser(
        "reassign", help="move a partition to new replicas (AlterPartitionReassignments, to the controller)")
    reassign_cmd.add_argument("--topic", required=True)
    reassign_cmd.add_argument("--partition", type=int, required=True)
    target = reassign_cmd.add_mutually_exclusive_group(required=True)
    target.add_argument("--replicas", help="the new replica list, e.g. 0,1,3 (the first is the preferred leader)")
    target.add_argument("--cancel", action="store_true", help="go back to the replicas before the reassignment")
    commands.add_parser("reassignments", help="the reassignments in progress (ListPartitionReassignments)")
    remove = commands.add_parser("remove-broker", help="remove a stopped broker from the cluster (UnregisterBroker)")
    remove.add_argument("--node", type=int, required=True)


def _say(message: str) -> None:
    print(f"epoch-broker admin: {message}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="epoch-broker admin", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    directory = args.cluster or (None if args.bootstrap else DEFAULT_CLUSTER_DIR)
    try:
        cluster = launcher.ClusterFile.read(directory) if directory else None
        return _COMMANDS[args.admin_command](args, directory, cluster)
    except (AdminError, KeyError, ProcessLookupError, launcher.LaunchError, OSError, ValueError) as exc:
        _say(f"{args.admin_command} failed: {exc.args[0] if isinstance(exc, KeyError) else exc}")
        return 1


def _need_cluster(args: argparse.Namespace, cluster: launcher.ClusterFile | None) -> launcher.ClusterFile:
    if cluster is None:
        raise ValueError(f"{args.admin_command} needs --cluster DIR (it works on the pids in cluster.json)")
    return cluster


def _elect(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    controller = args.bootstrap or asyncio.run(active_controller(_need_cluster(args, cluster)))
    target = f"node {args.leader}" if args.leader >= 0 else "the controller's choice"
    _say(f"{'unclean' if args.unclean else 'clean'} election of {args.topic}-{args.partition} "
         f"({target}) via {controller}")
    outcome = asyncio.run(elect(controller, args.topic, args.partition, args.leader, args.unclean))
    _say(f"{args.topic}-{args.partition}: {outcome}")
    return 0


def _reassign(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    controller = args.bootstrap or asyncio.run(active_controller(_need_cluster(args, cluster)))
    replicas = None if args.cancel else [int(r) for r in args.replicas.split(",")]
    what = "cancel the reassignment of" if replicas is None else f"move to replicas {replicas}:"
    _say(f"{what} {args.topic}-{args.partition} via {controller}")
    outcome = asyncio.run(reassign(controller, args.topic, args.partition, replicas))
    _say(f"{args.topic}-{args.partition}: {outcome} (follow it with `epoch-broker admin reassignments`)")
    return 0


def _reassignments(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    controller = args.bootstrap or asyncio.run(active_controller(_need_cluster(args, cluster)))
    ongoing = asyncio.run(reassignments(controller))
    if not ongoing:
        _say("no reassignment in progress")
    for topic, partition, replicas, adding, removing in ongoing:
        _say(f"{topic}-{partition}: replicas {replicas}, adding {adding}, removing {removing}")
    return 0


def _remove_broker(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    controller = args.bootstrap or asyncio.run(active_controller(_need_cluster(args, cluster)))
    _say(f"unregister broker {args.node} via {controller}")
    _say(f"broker {args.node}: {asyncio.run(remove_broker(controller, args.node))}")
    return 0


def _fault(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set needs key=value, got {item!r}")
        settings[key.strip()] = value.strip()
    if not settings and not args.clear:
        raise ValueError("give --set key=value or --clear key")
    address = args.bootstrap or _need_cluster(args, cluster).process(args.node).address
    changes = [f"set {k}={v}" for k, v in settings.items()] + [f"clear {k}" for k in args.clear]
    _say(f"node {args.node} at {address}: {', '.join(changes)}")
    outcome = asyncio.run(alter_faults(address, args.node, settings, args.clear))
    _say(f"node {args.node}: {outcome}")
    if POWER_LOSS in settings and cluster is not None:
        spec = cluster.process(args.node)
        if not launcher.wait_exit(spec, REQUEST_TIMEOUT_S):
            raise AdminError(f"{spec.name} (pid {spec.pid}) still runs after {POWER_LOSS}")
        _say(f"{spec.name} (pid {spec.pid}) exited")
    return 0


def _signal(args: argparse.Namespace, sig: signal.Signals, cluster: launcher.ClusterFile | None) -> int:
    spec = _need_cluster(args, cluster).process(args.node)
    _say(f"{sig.name} to {spec.name} (pid {spec.pid})")
    launcher.signal_process(spec, sig)
    if sig in (signal.SIGKILL, signal.SIGTERM):
        exited = launcher.wait_exit(spec, launcher.STOP_TIMEOUT_S)
        _say(f"{spec.name} {'exited' if exited else 'still runs'}")
        return 0 if exited else 1
    _say(f"{spec.name} is {launcher.process_state(spec)}")
    return 0


def _kill(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    return _signal(args, signal.Signals[f"SIG{args.signal}"], cluster)


def _pause(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    return _signal(args, signal.SIGSTOP, cluster)


def _resume(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    return _signal(args, signal.SIGCONT, cluster)


def _restart(args: argparse.Namespace, directory: str | None, cluster: launcher.ClusterFile | None) -> int:
    _need_cluster(args, cluster)
    assert directory is not None
    _say(f"restarting node {args.node}{' (SIGKILL first)' if args.hard else ''}")
    launcher.restart_process(directory, args.node, args.hard, _say)
    _say(f"updated {Path(directory) / launcher.CLUSTER_FILE}")
    return 0


def _status(args: argparse.Namespace, _: str | None, cluster: launcher.ClusterFile | None) -> int:
    while True:
        status = asyncio.run(cluster_status(args.bootstrap, cluster if args.bootstrap is None else None,
                                            _need_cluster(args, cluster) if args.bootstrap is None else None))
        if args.json:
            print(json.dumps(status), flush=True)
        else:
            _print_status(status)
        if args.watch is None:
            return 0
        time.sleep(args.watch)
        if args.bootstrap is None:
            cluster = launcher.ClusterFile.read(args.cluster)  # a restart records a new pid there


async def cluster_status(bootstrap: str | None, cluster: launcher.ClusterFile | None,
                         needed: launcher.ClusterFile | None) -> dict[str, Any]:
    """Processes (state, fault hooks in force) and partitions, as one JSON-ready document. The controller is
    named by its process (node id, address); Metadata's controller_id is what clients are told (a broker, as
    KRaft answers them), shown as `clients_controller`."""
    addresses = [bootstrap] if bootstrap else running_brokers(needed) if needed is not None else []
    processes = []
    for spec in cluster.processes if cluster is not None else []:
        state = launcher.process_state(spec)
        hooks: dict[str, str] | str = {}
        if spec.role == "broker" and state == "running":
            try:
                hooks = await faults_in_force(spec.address, spec.node_id)
            except AdminError as exc:
                hooks = f"unknown ({exc})"
        processes.append({"name": spec.name, "node_id": spec.node_id, "role": spec.role, "pid": spec.pid,
                          "address": spec.address, "state": state, "faults": hooks})
    document: dict[str, Any] = {"time": time.time(), "processes": processes}
    if cluster is not None:
        document["controller"] = {"node_id": cluster.controller.node_id, "address": cluster.controller.address}
        if (elected := zookeeper_controller(cluster)) is not None:
            document["controller"] = {**elected, "address": next(
                (spec.address for spec in cluster.controllers if spec.node_id == elected["node_id"]), None)}
    metadata_state = await fetch_metadata(addresses)
    document |= {"metadata_from": metadata_state.source, "clients_controller": metadata_state.controller_id,
                 "brokers": {str(n): a for n, a in sorted(metadata_state.brokers.items())},
                 "partitions": [{"topic": topic, "partition": partition, "leader": s.leader,
                                 "leader_epoch": s.leader_epoch, "isr": list(s.isr), "replicas": list(s.replicas)}
                                for (topic, partition), s in sorted(metadata_state.partitions.items())]}
    return document


async def faults_in_force(address: str, node_id: int, timeout_s: float = REQUEST_TIMEOUT_S) -> dict[str, str]:
    """The fault hooks set on a broker (DescribeConfigs of its broker resource: the dynamic `fault.*` keys, not
    the static fault.hooks.enable)."""
    request = describe_configs.REQUEST.cls(resources=[describe_configs.REQUEST.DescribeConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=str(node_id), configuration_keys=None)])
    response = await _call(address, timeout_s, lambda client: client.request(describe_configs.API, 4, request))
    (result,) = response.results
    if result.error_code:
        raise AdminError(_error(result.error_code, result.error_message))
    return {entry.name: entry.value for entry in result.configs
            if entry.name.startswith("fault.") and entry.config_source == DYNAMIC_BROKER_CONFIG}


def _print_status(status: dict[str, Any]) -> None:
    if status["processes"]:
        _print_table(["process", "node", "role", "pid", "address", "state", "fault hooks"],
                     [[p["name"], p["node_id"], p["role"], p["pid"], p["address"], p["state"],
                       p["faults"] if isinstance(p["faults"], str)
                       else ", ".join(f"{k}={v}" for k, v in p["faults"].items()) or "-"]
                      for p in status["processes"]])
    controller = status.get("controller")
    named = f"controller node {controller['node_id']} at {controller['address']}; " if controller else ""
    if controller and "controller_epoch" in controller:
        named = (f"active controller node {controller['node_id']} (controller epoch {controller['controller_epoch']} "
                 f"in ZooKeeper) at {controller['address']}; ")
    print(f"\n{named}metadata from {status['metadata_from']} (it tells clients broker "
          f"{status['clients_controller']} is the controller, as KRaft does): brokers "
          f"{', '.join(f'{n}={a}' for n, a in status['brokers'].items())}")
    _print_table(["topic", "partition", "leader", "epoch", "isr", "replicas"],
                 [[p["topic"], p["partition"], p["leader"], p["leader_epoch"], ",".join(map(str, p["isr"])),
                   ",".join(map(str, p["replicas"]))] for p in status["partitions"]])


def _print_table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


_COMMANDS = {"elect": _elect, "fault": _fault, "reassign": _reassign, "reassignments": _reassignments,
             "remove-broker": _remove_broker, "kill": _kill, "pause": _pause, "resume": _resume,
             "restart": _restart, "status": _status}

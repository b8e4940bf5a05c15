"""The one fault catalogue: every failure a drill can switch on in a running broker, from outside it.

Each fault is a broker config key `fault.*`, set with IncrementalAlterConfigs on resource type 4 named by the
node id (SET, or DELETE to clear; `epoch-broker admin fault --node N --set KEY=VALUE`), declared once in
`CATALOGUE` below with what it does. The code a fault affects reads `BrokerFaults`; nothing else switches
a fault on, and no fault exists only for tests (franz-go kfake's control hooks are the model).

Each fault's kind (`KINDS` below) says how its value reads. docs/faults.md is generated from this catalogue
(`render_reference`, `make docs`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from epoch_broker.broker import events
from epoch_broker.broker.reference import table
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import APIS
from epoch_broker.storage.fs import DiskFaults

log = logging.getLogger(__name__)

POWER_LOSS_EXIT_STATUS = 137
REPLICATION_PAUSED = "fault.replication.paused"
HIGH_WATERMARK_HELD = "fault.high.watermark.held"
METADATA_PAUSED = "fault.metadata.paused"
DISK_FULL = "fault.disk.full"
DISK_FSYNC_FAILING = "fault.disk.fsync.failing"
REQUEST_RULE_PREFIX = "fault.request."
POWER_LOSS = "fault.power.loss"
NETWORK_PARTITION = "fault.network.partition"
NETWORK_DELAY = "fault.network.delay"
CLOCK_OFFSET = "fault.clock.offset.ms"
MAX_CLOCK_OFFSET_MS = 10 * 365 * 24 * 3600 * 1000  # a decade either way: enough for any skew worth drilling
CONTROLLER_PEER = "controller"
CLIENT_PEER_PREFIX = "client:"


@dataclass(frozen=True, slots=True)
class FaultSpec:
    key: str
    kind: str  # a key of KINDS
    doc: str


KINDS: dict[str, str] = {
    "flag": "`true` or `false`; DELETE clears it (false)",
    "rule": "per API, `fault.request.<api>`: the API's name in snake case as in protocol/messages/ (`produce`, "
            "`list_offsets`) or its key; the value is comma-separated `error=<ERROR_NAME or code>`, `delay.ms=<n>`, "
            "`drop`, `count=<n>`: answer that error in every error field, after the delay, or close the connection; "
            "`count` requests only (default: until cleared). Applied in the dispatcher before the handler runs",
    "peers": "a comma-separated list of peers, as the hook's doc says; DELETE clears it",
    "value": "one number; DELETE sets it back to 0",
    "action": "happens once, when set; it cannot be cleared",
}


CATALOGUE: tuple[FaultSpec, ...] = (
    FaultSpec(REPLICATION_PAUSED, "flag",
              "the replica fetchers stop fetching (a follower falls behind, then out of the ISR)"),
    FaultSpec(HIGH_WATERMARK_HELD, "flag",
              "as a leader, follower fetches see the high watermark frozen where it was when the hold began "
              "(followers do not learn what was committed: KIP-101 scenario 1)"),
    FaultSpec(METADATA_PAUSED, "flag",
              "stop applying the controller's metadata (heartbeats go on): a stale leader, as behind a network "
              "partition from the controller (KIP-320, KIP-359 drills)"),
    FaultSpec(DISK_FULL, "flag",
              "every log write fails with ENOSPC: produces get KAFKA_STORAGE_ERROR, the logs stay as they were"),
    FaultSpec(DISK_FSYNC_FAILING, "flag",
              "every fsync fails with EIO: a log that meets it goes offline (KAFKA_STORAGE_ERROR) until restart"),
    FaultSpec(REQUEST_RULE_PREFIX + "<api>", "rule",
              "per-API rule: error=<NAME|code>, delay.ms=<n>, drop, count=<n> (comma-separated), e.g. "
              "fault.request.produce=error=NOT_LEADER_OR_FOLLOWER,count=3"),
    FaultSpec(NETWORK_PARTITION, "peers",
              "comma-separated peers this broker is cut off from: broker node ids, `controller`, or "
              "`client:<client.id>`. It neither connects to them (its replica fetchers and controller links close) "
              "nor serves them (their connections are closed): set it on both ends for a partition, on one for an "
              "asymmetric one"),
    FaultSpec(NETWORK_DELAY, "peers",
              "comma-separated peer=ms (peers as fault.network.partition names them), e.g. 1=200,controller=50: "
              "every request this broker sends to the peer or serves from it waits that long first (a slow link; "
              "set on one end, one way)"),
    FaultSpec(CLOCK_OFFSET, "value",
              "milliseconds (negative: behind) added to this broker's wall clock, as on a machine whose clock is "
              "off: LogAppendTime stamps, the time index, time-based segment rolling and retention, timestamp "
              "validation, group and offset-commit times. Deadlines (sessions, ISR lag, timeouts) run on the "
              "monotonic clock, which a wrong wall clock does not move, and event lines keep the true time so "
              "that a cluster's timeline still merges"),
    FaultSpec(POWER_LOSS, "action",
              "every log loses what was not fsynced (cut to its recovery point) and the process exits at once "
              f"with status {POWER_LOSS_EXIT_STATUS}, without answering"),
)
# flag key -> (object holding it, attribute), for the BrokerFaults `faults`
_FLAG_TARGETS: dict[str, Callable[[BrokerFaults], tuple[object, str]]] = {
    REPLICATION_PAUSED: lambda faults: (faults, "replication_paused"),
    HIGH_WATERMARK_HELD: lambda faults: (faults, "high_watermark_held"),
    METADATA_PAUSED: lambda faults: (faults, "metadata_paused"),
    DISK_FULL: lambda faults: (faults.disk, "full"),
    DISK_FSYNC_FAILING: lambda faults: (faults.disk, "fsync_failing"),
}
# `fault.request.list_offsets` or `fault.request.ListOffsets` (case-insensitive), or `fault.request.2`
_API_BY_NAME = {name: api for api in APIS.values()
                for name in (api.name.lower(), re.sub(r"(?<!^)(?=[A-Z])", "_", api.name).lower())}


class FaultConfigError(ValueError):
    """A fault key or value that cannot be applied (answered INVALID_CONFIG, nothing changed)."""


@dataclass(slots=True)
class RequestRule:
    """One fault rule for an API key: answer `error` (when set), after `delay_s`, or drop the connection."""

    error: ErrorCode | None = None
    delay_s: float = 0.0
    drop_connection: bool = False
    remaining: int | None = None  # None: until cleared
    setting: tuple[str, str] = ("", "")  # the key and value it was set with, for DescribeConfigs


@dataclass(slots=True)
class BrokerFaults:
    """The faults in force in this process. `on_power_loss` is the broker's (it owns the logs)."""

    replication_paused: bool = False
    high_watermark_held: bool = False
    metadata_paused: bool = False
    disk: DiskFaults = field(default_factory=DiskFaults)
    requests: dict[int, RequestRule] = field(default_factory=dict)
    partitioned_from: frozenset[str] = frozenset()  # fault.network.partition's peers
    delays_s: dict[str, float] = field(default_factory=dict)  # fault.network.delay: peer -> seconds
    clock_offset_ms: int = 0  # fault.clock.offset.ms
    on_power_loss: Callable[[], None] | None = None
    hooks_enabled: bool = False  # fault.hooks.enable: off, no hook can be set


    # -- parsing and applying (IncrementalAlterConfigs) -------------------------------------------------

    def validate(self, key: str, value: str | None) -> Callable[[], None]:
        """Check `key` = `value` (None: clear it); returns the change to apply. Raises FaultConfigError."""
        if not self.hooks_enabled and key.startswith("fault."):
            raise FaultConfigError(f"{key}: fault hooks are off on this broker (start it with "
                                   "fault.hooks.enable=true, as the cluster launcher, drill and test kit do)")
        if key in _FLAG_TARGETS:
            flag = _parse_flag(key, value)
            return lambda: self._set_flag(key, flag)
        if key.startswith(REQUEST_RULE_PREFIX):
            api_key = _parse_api(key)
            rule = None if value is None else _parse_rule(key, value)
            return lambda: self._set_rule(key, api_key, rule)
        if key == NETWORK_PARTITION:
            peers = _parse_peers(key, value)
            return lambda: self._set_partition(peers)
        if key == NETWORK_DELAY:
            delays = _parse_delays(key, value)
            return lambda: self._set_delays(delays, value)
        if key == CLOCK_OFFSET:
            offset = _parse_clock_offset(key, value)
            return lambda: self._set_clock_offset(offset)
        if key == POWER_LOSS:
            if value is None:
                raise FaultConfigError(f"{key} is an action: it cannot be cleared")
            return self.lose_power
        raise FaultConfigError(f"{key} is not an alterable broker config (fault hooks: "
                               f"{', '.join(spec.key for spec in CATALOGUE)})")

    def _set_flag(self, key: str, value: bool) -> None:
        holder, attribute = _FLAG_TARGETS[key](self)
        setattr(holder, attribute, value)
        log.warning("fault hook %s = %s", key, str(value).lower())
        events.emit("fault", key=key, value=str(value).lower())

    def _set_rule(self, key: str, api_key: int, rule: RequestRule | None) -> None:
        if rule is None:
            self.requests.pop(api_key, None)
        else:
            self.requests[api_key] = rule
        log.warning("fault hook %s = %s", key, rule)
        events.emit("fault", key=key, value="cleared" if rule is None else rule.setting[1])

    def _set_partition(self, peers: frozenset[str]) -> None:
        self.partitioned_from = peers
        log.warning("fault hook %s = %s", NETWORK_PARTITION, ",".join(sorted(peers)) or "cleared")
        events.emit("fault", key=NETWORK_PARTITION, value=",".join(sorted(peers)) or "cleared")

    def _set_delays(self, delays: dict[str, float], text: str | None) -> None:
        self.delays_s = delays
        log.warning("fault hook %s = %s", NETWORK_DELAY, text or "cleared")
        events.emit("fault", key=NETWORK_DELAY, value=text or "cleared")

    def _set_clock_offset(self, offset_ms: int) -> None:
        self.clock_offset_ms = offset_ms
        log.warning("fault hook %s = %d", CLOCK_OFFSET, offset_ms)
        events.emit("fault", key=CLOCK_OFFSET, value=str(offset_ms) if offset_ms else "cleared")

    def wall_clock_ms(self) -> int:
        """This broker's wall clock: the true one, off by fault.clock.offset.ms."""
        return int(time.time() * 1000) + self.clock_offset_ms

    def delay_s(self, peer: str) -> float:
        """How long a request to or from `peer` waits first (fault.network.delay), 0 if it does not."""
        return self.delays_s.get(peer, 0.0)

    def cut_off(self, peer: str) -> bool:
        """Whether `peer` (a node id as text, `controller`, or `client:<id>`) is behind fault.network.partition."""
        return peer in self.partitioned_from

    def lose_power(self) -> None:
        log.warning("fault hook %s: losing every log's unflushed tail and exiting with status %d", POWER_LOSS,
                    POWER_LOSS_EXIT_STATUS)
        if self.on_power_loss is None:
            raise FaultConfigError(f"{POWER_LOSS} is not available in this process")
        self.on_power_loss()

    # -- read by the dispatcher ------------------------------------------------------------------------

    def in_force(self) -> dict[str, str]:
        """The fault hooks set now, as keys and values (DescribeConfigs shows them)."""
        found = {key: "true" for key, target in _FLAG_TARGETS.items() if getattr(*target(self))}
        if self.partitioned_from:
            found[NETWORK_PARTITION] = ",".join(sorted(self.partitioned_from))
        if self.delays_s:
            found[NETWORK_DELAY] = ",".join(f"{peer}={seconds * 1000:g}"
                                            for peer, seconds in sorted(self.delays_s.items()))
        if self.clock_offset_ms:
            found[CLOCK_OFFSET] = str(self.clock_offset_ms)
        return found | dict(rule.setting for rule in self.requests.values())

    def take_request_rule(self, api_key: int) -> RequestRule | None:
        """The rule for this request, if any (counted: a rule with `count` is removed after its last use)."""
        rule = self.requests.get(api_key)
        if rule is None:
            return None
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                del self.requests[api_key]
        return rule


def _parse_flag(key: str, value: str | None) -> bool:
    if value is None:
        return False
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise FaultConfigError(f"invalid value for {key}: {value!r} (expected true or false)")
    return text == "true"


def _parse_clock_offset(key: str, value: str | None) -> int:
    if value is None:
        return 0
    try:
        offset = int(value.strip())
    except ValueError:
        raise FaultConfigError(f"invalid value for {key}: {value!r} (expected milliseconds, e.g. -3600000)") from None
    if abs(offset) > MAX_CLOCK_OFFSET_MS:
        raise FaultConfigError(f"invalid value for {key}: {offset} (at most {MAX_CLOCK_OFFSET_MS} either way)")
    return offset


def _parse_api(key: str) -> int:
    name = key.removeprefix(REQUEST_RULE_PREFIX)
    if name.isdigit():
        return int(name)
    api = _API_BY_NAME.get(name.lower())
    if api is None:
        raise FaultConfigError(f"{key}: unknown API {name!r} (use its name in snake case, e.g. produce, "
                               "list_offsets, or its key)")
    return api.key


def _parse_peers(key: str, value: str | None) -> frozenset[str]:
    peers = frozenset(p.strip() for p in (value or "").split(",") if p.strip())
    for peer in peers:
        _check_peer(key, peer)
    return peers


def _check_peer(key: str, peer: str) -> None:
    if not (peer.isdigit() or peer == CONTROLLER_PEER
            or (peer.startswith(CLIENT_PEER_PREFIX) and len(peer) > len(CLIENT_PEER_PREFIX))):
        raise FaultConfigError(f"{key}: {peer!r} is not a peer (a broker node id, `{CONTROLLER_PEER}`, or "
                               f"`{CLIENT_PEER_PREFIX}<client.id>`)")


def _parse_delays(key: str, value: str | None) -> dict[str, float]:
    delays = {}
    for part in (p.strip() for p in (value or "").split(",") if p.strip()):
        peer, _, ms = part.rpartition("=")
        _check_peer(key, peer.strip())
        if not ms.strip().isdigit():
            raise FaultConfigError(f"{key}: {part!r} is not peer=milliseconds")
        delays[peer.strip()] = int(ms) / 1000
    return delays


def peer_of(client_id: str | None) -> str:
    """The peer a request comes from, as fault.network.partition names it: a broker's replica fetcher (its
    client id `replica-fetcher-<node>`) is that broker; anything else is the client of that client.id."""
    found = re.fullmatch(r"replica-fetcher-(\d+)", client_id or "")
    return found.group(1) if found else f"{CLIENT_PEER_PREFIX}{client_id or ''}"


def _parse_rule(key: str, value: str) -> RequestRule:
    rule = RequestRule(setting=(key, value))
    for part in (p.strip() for p in value.split(",") if p.strip()):
        name, _, argument = part.partition("=")
        try:
            if name == "error":
                rule.error = ErrorCode(int(argument)) if argument.lstrip("-").isdigit() else ErrorCode[argument]
            elif name == "delay.ms":
                rule.delay_s = int(argument) / 1000
            elif name == "count":
                rule.remaining = int(argument)
            elif name == "drop" and not argument:
                rule.drop_connection = True
            else:
                raise FaultConfigError(f"{key}: unknown setting {part!r} (error=, delay.ms=, drop, count=)")
        except (KeyError, ValueError) as exc:
            if isinstance(exc, FaultConfigError):
                raise
            raise FaultConfigError(f"{key}: bad value in {part!r}") from exc
    if rule.delay_s < 0 or (rule.remaining is not None and rule.remaining < 1):
        raise FaultConfigError(f"{key}: delay.ms must be >= 0 and count >= 1")
    if rule.error is None and not rule.drop_connection and not rule.delay_s:
        raise FaultConfigError(f"{key}: a rule needs error=, delay.ms= or drop")
    return rule


def describe() -> str:
    """The catalogue as help text (`epoch-broker admin fault --help`)."""
    width = max(len(spec.key) for spec in CATALOGUE)
    return "\n".join(f"  {spec.key:<{width}}  ({spec.kind}) {spec.doc}" for spec in CATALOGUE)


def render_reference() -> str:
    """docs/faults.md: every hook of the catalogue, then the kinds."""
    return f"""# Fault hooks

Every `fault.*` hook a broker serves, to break it on purpose from outside its process, and what each does. Set one
with `epoch-broker admin fault --node N --set KEY=VALUE` (`--clear KEY` clears it), with the test kit's
`cluster.fault(node, KEY, VALUE)`, or with any client's IncrementalAlterConfigs on the broker resource (type 4)
named by the node id. A broker serves them only when started with `fault.hooks.enable=true` (the cluster launcher,
the drills and the test kit start theirs so); DescribeConfigs on the broker lists the hooks in force.

{table(("hook", "kind", "what it does"), ((f"`{spec.key}`", spec.kind, spec.doc) for spec in CATALOGUE))}

## Kinds

{table(("kind", "value"), KINDS.items())}
"""

"""Client telemetry (KIP-714, Kafka's ClientMetricsManager): which metrics each client instance is asked to push,
its pushes checked as Kafka checks them, and the latest metrics each instance pushed, for /metrics and the status
page.

Subscriptions are client-metrics config resources (ConfigResource type 16), one per name, held in the metadata
image (`MetadataCache.client_metrics`, from the controller's ClientMetricsConfigRecord) and set with
IncrementalAlterConfigs as Kafka sets them (`ClientMetricsConfigs`):
    metrics      LIST   metric name prefixes; `*` every metric                        (default: none)
    interval.ms  INT    how often a matched client pushes, 100 to 3600000              (default: 300000)
    match        LIST   `selector=regex` pairs a client must all match, whole (client_instance_id, client_id,
                        client_software_name, client_software_version, client_source_address, client_source_port;
                        none: every client)

Rules (Kafka's):
- A client instance gets every prefix of the subscriptions it matches (just `*` if one has it) and the lowest of
  their intervals; the subscription id is CRC-32C of that set and interval, XOR the instance id's hash. With no
  subscription matching: no metrics and the default interval: the client pushes nothing.
- GetTelemetrySubscriptions with the zero uuid is a new instance: a random id is assigned. Asking again before
  the push interval has passed is THROTTLING_QUOTA_EXCEEDED, unless the last push was refused for a stale
  subscription or a compression type (the client must re-fetch then; Kafka means to allow it, its HEAD's test of
  that is always true). When the subscriptions change, the instance is evaluated again on its next request, with
  fresh timers.
- PushTelemetry: a reserved instance id (zero, one) is INVALID_REQUEST, as is any push after a terminating one;
  a push before the interval (unless terminating, or the first after a GetTelemetrySubscriptions: clients add
  jitter) THROTTLING_QUOTA_EXCEEDED; another subscription id UNKNOWN_SUBSCRIPTION_ID; a codec not Kafka's
  UNSUPPORTED_COMPRESSION_TYPE; a payload over TELEMETRY_MAX_BYTES TELEMETRY_TOO_LARGE. Each refusal is checked in
  that order. A payload that does not decompress or decode is INVALID_RECORD (Kafka's answer when its receiver
  fails).
- Instances expire max(60 s, 3 x their push interval) after their last request, at most CACHE_MAX_SIZE of them
  (the least recently used goes first); each keeps at most MAX_POINTS_PER_INSTANCE points of its latest push, all
  of them together at most MAX_POINTS_TOTAL (the oldest pushes' points are dropped first).
- The software name and version a client gave in ApiVersions (v3+) on its connection are matched as
  client_software_name / client_software_version; a connection that did not give them matches neither.
- Skipped: telemetry.max.bytes is Kafka's default, not a setting.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.otlp import MetricPoint, metric_points
from epoch_broker.protocol.records import Compression, crc32c_of, decompress

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")
# What Kafka's broker answers: its preference order, and 1 MiB (its telemetry.max.bytes default)
ACCEPTED_COMPRESSION_TYPES = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
TELEMETRY_MAX_BYTES = 1 << 20
MAX_DECOMPRESSED_BYTES = 16 << 20
CACHE_MAX_SIZE = 16384  # Kafka's: 16k client connections a broker
CACHE_EXPIRY_MS = 60_000
MAX_POINTS_PER_INSTANCE = 2000
MAX_POINTS_TOTAL = 100_000
_RESERVED_IDS = (bytes(16), bytes(15) + b"\x01")  # Kafka's Uuid.RESERVED: ZERO_UUID and ONE_UUID
Software = tuple[str, str] | None  # the (name, version) a client gave in ApiVersions v3+ on its connection


def _list(value: str | None) -> list[str]:
    """A LIST config's items, as Kafka's ConfigDef parses one."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """selector -> compiled regex; ValueError naming a bad pattern (no `=`, another selector, a bad regex)."""
    parsed = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ValueError(f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ValueError(f"Illegal client matching pattern: {pattern}") from None
    return parsed


def validate_client_metrics_configs(name: str, configs: Mapping[str, str]) -> tuple[ErrorCode, str] | None:
    """Why a client-metrics resource's configs are refused, as Kafka's ClientMetricsConfigs.validate: an empty
    name, an unknown key or an interval out of range INVALID_REQUEST, a bad match pattern INVALID_CONFIG."""
    if not name:
        return ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"
    for key in configs:
        if key not in (METRICS, INTERVAL_MS, MATCH):
            return ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS].strip())
        except ValueError:
            return ErrorCode.INVALID_CONFIG, f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}"
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            return ErrorCode.INVALID_REQUEST, (f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                                               f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    try:
        parse_match(_list(configs.get(MATCH)))
    except ValueError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    return None


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    @classmethod
    def of(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        return cls(name, tuple(_list(configs.get(METRICS))),
                   int(configs.get(INTERVAL_MS, DEFAULT_INTERVAL_MS)), parse_match(_list(configs.get(MATCH))))

    def matches(self, selectors: Mapping[str, str | None]) -> bool:
        for selector, pattern in self.match.items():
            value = selectors.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def kafka_uuid_text(raw: bytes) -> str:
    """A uuid as Kafka's Uuid.toString writes it: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def subscription_id(metrics: list[str], interval_ms: int, instance_id: bytes) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of the metrics (as a Java set prints) and interval, XOR the id's
    hashCode (the two halves' longs XORed, then folded to an int). The set is printed sorted here."""
    crc = crc32c_of(f"[{', '.join(sorted(metrics))}]{interval_ms}".encode())
    high, low = int.from_bytes(instance_id[:8], "big"), int.from_bytes(instance_id[8:], "big")
    folded = ((high ^ low) >> 32) ^ ((high ^ low) & 0xFFFFFFFF)
    value = (crc ^ folded) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(slots=True)
class ClientInstance:
    """One client instance: its subscription as last evaluated, its timers, and its latest pushed metrics."""

    instance_id: bytes
    client_id: str
    source: str  # host:port of the connection that last asked
    subscriptions_seen: object  # the subscriptions it was evaluated against
    metrics: list[str]
    interval_ms: int
    subscription_id: int
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    last_request_ms: float = 0.0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    pushes: int = 0
    points: list[MetricPoint] = field(default_factory=list)
    pushed_at_ms: float | None = None  # wall clock of its latest accepted push with metrics

    @property
    def expiry_ms(self) -> float:
        return max(CACHE_EXPIRY_MS, 3 * self.interval_ms)


@dataclass(slots=True)
class SubscriptionAnswer:
    instance_id: bytes
    subscription_id: int
    metrics: list[str]
    interval_ms: int


class ClientMetricsManager:
    """The client instances a broker knows, evaluated against `subscriptions()` (the image's client-metrics
    resources); `clock` is milliseconds (monotonic)."""

    def __init__(self, subscriptions: Callable[[], Mapping[str, Mapping[str, str]]],
                 clock: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self.subscriptions = subscriptions
        self.clock = clock
        self.instances: OrderedDict[bytes, ClientInstance] = OrderedDict()  # least recently used first

    def get_telemetry_subscriptions(self, instance_id: bytes, client_id: str, source: str,
                                    software: Software = None) -> tuple[ErrorCode, SubscriptionAnswer]:
        now = self.clock()
        if instance_id == bytes(16):
            instance_id = self._new_id()
        instance = self._instance(instance_id, client_id, source, software, now)
        answer = SubscriptionAnswer(instance_id, instance.subscription_id, instance.metrics, instance.interval_ms)
        if now - max(instance.last_get_ms, instance.last_push_ms) < instance.interval_ms and (
                instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, answer
        instance.last_get_ms = now
        instance.last_error = ErrorCode.NONE
        return ErrorCode.NONE, answer

    def push_telemetry(self, instance_id: bytes, client_id: str, source: str, subscription: int, terminating: bool,
                       compression_type: int, payload: bytes, software: Software = None) -> ErrorCode:
        if instance_id in _RESERVED_IDS:
            return ErrorCode.INVALID_REQUEST
        now = self.clock()
        instance = self._instance(instance_id, client_id, source, software, now)
        error = self._check_push(instance, now, subscription, terminating, compression_type, len(payload))
        instance.terminating = instance.terminating or terminating
        if error == ErrorCode.NONE and payload:
            try:
                data = payload if compression_type == Compression.NONE else bytes(
                    decompress(Compression(compression_type), payload, MAX_DECOMPRESSED_BYTES))
                points = metric_points(data)
            except Exception:  # each codec has its own errors (zlib.error, cramjam's), the reader OtlpError
                error = ErrorCode.INVALID_RECORD
            else:
                self._keep(instance, points)
        instance.last_error = error
        return error

    def _check_push(self, instance: ClientInstance, now: float, subscription: int, terminating: bool,
                    compression_type: int, size: int) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        # the first push after a GetTelemetrySubscriptions is accepted whenever it comes (the client's jitter)
        if instance.last_get_ms > instance.last_push_ms or now - instance.last_push_ms >= instance.interval_ms:
            instance.last_push_ms = now
        elif not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if subscription != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression_type not in tuple(Compression):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if size > TELEMETRY_MAX_BYTES:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _keep(self, instance: ClientInstance, points: list[MetricPoint]) -> None:
        latest = {(point.name, point.attributes): point for point in points}  # a series pushed twice: its last
        instance.points = list(latest.values())[:MAX_POINTS_PER_INSTANCE]
        instance.pushes += 1
        instance.pushed_at_ms = time.time() * 1000
        total = sum(len(i.points) for i in self.instances.values())
        for other in sorted(self.instances.values(), key=lambda i: i.pushed_at_ms or 0.0):
            if total <= MAX_POINTS_TOTAL:
                break
            if other is not instance:
                total -= len(other.points)
                other.points = []

    def live_instances(self) -> list[ClientInstance]:
        """The instances not expired, least recently asking first."""
        self._expire(self.clock())
        return list(self.instances.values())

    def _new_id(self) -> bytes:
        while True:
            candidate = uuid.uuid4().bytes
            if candidate not in self.instances and candidate not in _RESERVED_IDS:
                return candidate

    def _instance(self, instance_id: bytes, client_id: str, source: str, software: Software, now: float
                  ) -> ClientInstance:
        """The instance, made or evaluated again if the subscriptions changed since; marked used now."""
        self._expire(now)
        configs = self.subscriptions()
        seen = tuple(sorted((name, tuple(sorted(c.items()))) for name, c in configs.items()))
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscriptions_seen != seen:
            metrics, interval = self._evaluate(configs, instance_id, client_id, source, software)
            fresh = ClientInstance(instance_id, client_id, source, seen, metrics, interval,
                                   subscription_id(metrics, interval, instance_id))
            if instance is not None:  # its pushed metrics stay until the next push
                fresh.points, fresh.pushes, fresh.pushed_at_ms = instance.points, instance.pushes, instance.pushed_at_ms
            instance = self.instances[instance_id] = fresh
        instance.client_id, instance.source, instance.last_request_ms = client_id, source, now
        self.instances.move_to_end(instance_id)
        while len(self.instances) > CACHE_MAX_SIZE:
            self.instances.popitem(last=False)
        return instance

    @staticmethod
    def _evaluate(configs: Mapping[str, Mapping[str, str]], instance_id: bytes, client_id: str, source: str,
                  software: Software) -> tuple[list[str], int]:
        host, _, port = source.rpartition(":")
        name, version = software or (None, None)
        selectors = {"client_instance_id": kafka_uuid_text(instance_id), "client_id": client_id,
                     "client_software_name": name, "client_software_version": version,
                     "client_source_address": host or None, "client_source_port": port or None}
        metrics: set[str] = set()
        interval = DEFAULT_INTERVAL_MS
        for name, subscription_configs in configs.items():
            subscription = Subscription.of(name, subscription_configs)
            if subscription.matches(selectors):
                metrics.update(subscription.metrics)
                interval = min(interval, subscription.interval_ms)
        return ([ALL_METRICS] if ALL_METRICS in metrics else sorted(metrics)), interval

    def _expire(self, now: float) -> None:
        for instance_id in [i for i, instance in self.instances.items()
                            if now - instance.last_request_ms >= instance.expiry_ms]:
            del self.instances[instance_id]

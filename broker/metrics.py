"""The Prometheus metrics of one broker or controller process: every metric is declared here, once.

Names are Kafka's JMX names mapped the way the Prometheus JMX exporter's Kafka rules map them: the MBean
`kafka.<domain>:type=<Type>,name=<Name>` becomes `kafka_<domain>_<type>_<name>` in lower case, a `...PerSec`
meter a `_total` counter, its keys labels (`request`, `error`, `topic`, `partition`). What Kafka has no MBean
for (leader epochs, truncations, KIP-207 refusals, fenced fetches) takes the same shape under Kafka's nearest
type; consumer lag uses kafka_exporter's names. Kafka's own-metrics (`kafka.server:type=<group>`, attribute
`<name>`, as KIP-848's `group-coordinator-metrics`) map the way `socket-server-metrics` does: the group's hyphens
dropped, the name's become underscores (`kafka_server_groupcoordinatormetrics_consumer_group_count`). The README's
Observability section has the table; a test checks it names every family here and nothing else.

Rules:
- One `ProcessMetrics`, with its own `CollectorRegistry`, per broker or controller object: several brokers in
  one test process never share a number.
- Events are counted where they happen (the dispatcher, `Partition`, the replica manager, the controller's
  commit, the group coordinator) by the `record_*` methods below, into plain numbers the event loop owns: no
  lock and no prometheus_client instrument on the request path (an instrument's labels lookup, lock and bucket
  loop cost 8.6 us a request; these numbers about 2 us).
- State (partition counts, log offsets and sizes, leader epochs, follower and consumer lag, group states,
  fenced brokers) is read at scrape time from the state the event loop owns. The scrape runs on the loop
  (broker/status.py), so it sees one consistent state, and nothing is kept twice.
- `families()` is every metric as prometheus_client metric families (what the registry's collector yields);
  `exposition()` writes them in the text format 0.0.4 directly, for a thousand partitions twenty times faster
  than prometheus_client's writer, which checks and escapes each sample's name.
- A process without `metrics.listener` has no `ProcessMetrics` (its owners hold None and count nothing), and
  never imports prometheus_client.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupState
from epoch_broker.broker.metadata.records import PartitionChangeRecord
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.schema import Api, Field
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from epoch_broker.broker.controller.controller import Controller
    from epoch_broker.broker.services import BrokerServices

# Request latency buckets (ms): from a local append to a long poll's max wait.
LATENCY_BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BUCKET_LABELS = [*(str(float(bound)) for bound in LATENCY_BUCKETS_MS), "+Inf"]
_ERROR_NAMES = {code.value: code.name for code in ErrorCode}
# kafka.network:type=RequestMetrics latencies: (family name, help)
LATENCIES = (
    ("kafka_network_requestmetrics_totaltimems",
     "Request time from the read of its frame to its response encoded for the socket (ms)"),
    ("kafka_network_requestmetrics_requestqueuetimems",
     "Time a read request waited before its handler ran: behind the connection's request in flight, for the "
     "broker to be ready, a fault hook's delay (ms)"),
    ("kafka_network_requestmetrics_localtimems", "Handler time, less the remote wait (ms)"),
    ("kafka_network_requestmetrics_remotetimems",
     "Time waiting on others: acks=all replication, a Fetch long poll (ms)"),
)
# Per-topic counters: (TopicStats attribute, family name, help, further labels: name, value, ...)
TOPIC_COUNTERS = (
    ("bytes_in", "kafka_server_brokertopicmetrics_bytesin", "Bytes produced, per topic", ()),
    ("messages_in", "kafka_server_brokertopicmetrics_messagesin", "Records produced, per topic", ()),
    ("bytes_out", "kafka_server_brokertopicmetrics_bytesout", "Bytes fetched by consumers, per topic", ()),
    ("replication_bytes_in", "kafka_server_brokertopicmetrics_replicationbytesin",
     "Bytes appended as a follower, per topic", ()),
    ("replication_bytes_out", "kafka_server_brokertopicmetrics_replicationbytesout",
     "Bytes fetched by follower replicas, per topic", ()),
    ("fenced_consumer_fetches", "kafka_server_replicamanager_fencedfetches",
     "Fetches refused FENCED_LEADER_EPOCH (KIP-320), per topic and fetcher kind", ("fetcher", "consumer")),
    ("fenced_follower_fetches", "kafka_server_replicamanager_fencedfetches", "", ("fetcher", "follower")),
    ("offsets_not_available", "kafka_server_replicamanager_offsetnotavailable",
     "ListOffsets refused OFFSET_NOT_AVAILABLE while a new leader's high watermark catches up (KIP-207), per "
     "topic", ()),
    ("truncations", "kafka_server_replicafetchermanager_truncations",
     "Follower truncations that cut records (KIP-101), per topic", ()),
    ("truncated_records", "kafka_server_replicafetchermanager_truncatedrecords",
     "Offsets cut by follower truncations, per topic", ()),
)
# Process-wide counters: (key in ProcessMetrics.counters, family name, help)
COUNTERS = (
    ("isr_shrinks", "kafka_server_replicamanager_isrshrinks",
     "ISR shrinks this broker asked for and the controller committed (as leader)"),
    ("isr_expands", "kafka_server_replicamanager_isrexpands",
     "ISR expansions this broker asked for and the controller committed (as leader)"),
    ("elections", "kafka_controller_controllerstats_leaderelections",
     "Leader changes to a live broker committed by the controller"),
    ("unclean_elections", "kafka_controller_controllerstats_uncleanleaderelections",
     "Elections of a leader from outside the ISR"),
    ("controller_isr_shrinks", "kafka_controller_controllerstats_isrshrinks",
     "ISR shrinks committed by the controller, for any reason (a fencing too)"),
    ("controller_isr_expands", "kafka_controller_controllerstats_isrexpands",
     "ISR expansions committed by the controller"),
)


class Latency:
    """A histogram: a count per bucket (not cumulative) and the sum."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.sum = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1  # the first bucket whose bound is >= ms
        self.sum += ms


class ApiStats:
    """What one API's requests did: counts per version, error codes, and the four latencies."""

    __slots__ = ("error_paths", "errors", "latencies", "name", "requests")

    def __init__(self, api: Api) -> None:
        self.name = api.name
        self.requests: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.latencies = (Latency(), Latency(), Latency(), Latency())  # total, queue, local, remote
        self.error_paths = _error_paths(api.response.fields)


class TopicStats:
    __slots__ = tuple(attribute for attribute, *_ in TOPIC_COUNTERS)
    # declared for the type checker (the slots above make them): one per TOPIC_COUNTERS entry
    bytes_in: int
    messages_in: int
    bytes_out: int
    replication_bytes_in: int
    replication_bytes_out: int
    fenced_consumer_fetches: int
    fenced_follower_fetches: int
    offsets_not_available: int
    truncations: int
    truncated_records: int

    def __init__(self) -> None:
        for attribute in self.__slots__:
            setattr(self, attribute, 0)


class ProcessMetrics:
    """The metrics of one process: its registry, the numbers its events add to, and the state it samples."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        self.topics: dict[str, TopicStats] = {}
        self.rebalances: dict[str, int] = {}  # classic groups: generations completed
        self.consumer_group_rebalances: dict[str, int] = {}  # consumer groups: group epoch bumps
        self.counters = dict.fromkeys((key for key, *_ in COUNTERS), 0)
        self._sampled: list[Callable[[], Iterable[Metric]]] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Families(self))

    # -- recording ----------------------------------------------------------------------------------

    def record_request(self, api: Api, version: int, response: Any, total_s: float, queue_s: float,
                       remote_s: float) -> None:
        """One request answered (`response` None when none was due: acks=0)."""
        stats = self.apis.get(api.key)
        if stats is None:
            stats = self.apis[api.key] = ApiStats(api)
        stats.requests[version] = stats.requests.get(version, 0) + 1
        total, queue, local, remote = stats.latencies
        total.observe(total_s * 1000)
        queue.observe(queue_s * 1000)
        local.observe(max(total_s - queue_s - remote_s, 0.0) * 1000)
        remote.observe(remote_s * 1000)
        if response is not None:
            _count(response, stats.error_paths, stats.errors)

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def record_produce(self, topic: str, size: int, records: int) -> None:
        stats = self.topic(topic)
        stats.bytes_in += size
        stats.messages_in += records

    def record_fetch(self, topic: str, size: int, by_replica: bool) -> None:
        stats = self.topic(topic)
        if by_replica:
            stats.replication_bytes_out += size
        else:
            stats.bytes_out += size

    def record_follower_append(self, topic: str, size: int) -> None:
        self.topic(topic).replication_bytes_in += size

    def record_isr_change(self, before: int, after: int) -> None:
        """An AlterPartition of this broker's was committed."""
        if after < before:
            self.counters["isr_shrinks"] += 1
        elif after > before:
            self.counters["isr_expands"] += 1

    def record_fenced_fetch(self, topic: str, by_replica: bool) -> None:
        stats = self.topic(topic)
        if by_replica:
            stats.fenced_follower_fetches += 1
        else:
            stats.fenced_consumer_fetches += 1

    def record_offset_not_available(self, topic: str) -> None:
        self.topic(topic).offsets_not_available += 1

    def record_truncation(self, topic: str, records: int) -> None:
        stats = self.topic(topic)
        stats.truncations += 1
        stats.truncated_records += records

    def record_rebalance(self, group: str) -> None:
        self.rebalances[group] = self.rebalances.get(group, 0) + 1

    def record_consumer_group_rebalance(self, group: str) -> None:
        """A KIP-848 group's epoch moved: a new target assignment is due."""
        self.consumer_group_rebalances[group] = self.consumer_group_rebalances.get(group, 0) + 1

    def record_controller_commit(self, controller: Controller, records: Iterable[Any]) -> None:
        """Before `records` are applied: each partition change compared with the state it replaces."""
        image = controller.image
        for record in records:
            if not isinstance(record, PartitionChangeRecord):
                continue
            topic = image.topics_by_id.get(record.topic_id)
            state = None if topic is None else topic.partitions.get(record.partition)
            if state is None:
                continue
            if record.leader != state.leader and record.leader >= 0:
                self.counters["elections"] += 1
                if record.leader not in state.isr:
                    self.counters["unclean_elections"] += 1
            if len(record.isr) < len(state.isr):
                self.counters["controller_isr_shrinks"] += 1
            elif len(record.isr) > len(state.isr):
                self.counters["controller_isr_expands"] += 1

    # -- state read at scrape time ------------------------------------------------------------------

    def watch_broker(self, broker: BrokerServices, connections: Callable[[], int]) -> None:
        self._sampled.append(lambda: _broker_families(broker, connections()))

    def watch_controller(self, controller: Controller) -> None:
        self._sampled.append(lambda: _controller_families(controller))

    # -- exposition ---------------------------------------------------------------------------------

    def families(self) -> Iterator[Metric]:
        """Every metric of the process, counted and sampled, as metric families."""
        yield from self._request_families()
        by_name: dict[str, CounterMetricFamily] = {}
        for attribute, name, doc, extra in TOPIC_COUNTERS:
            family = by_name.get(name)
            if family is None:
                family = by_name[name] = CounterMetricFamily(name, doc, labels=["topic", *extra[::2]])
            for topic, stats in self.topics.items():
                family.add_metric([topic, *extra[1::2]], getattr(stats, attribute))
        yield from by_name.values()
        for key, name, doc in COUNTERS:
            yield CounterMetricFamily(name, doc, value=self.counters[key])
        rebalances = CounterMetricFamily("kafka_coordinator_group_groupmetadatamanager_rebalances",
                                         "Rebalances completed (a new generation), per group", labels=["group"])
        for group, count in self.rebalances.items():
            rebalances.add_metric([group], count)
        yield rebalances
        # Kafka's consumer-group-rebalance-count counts the bumps a heartbeat decides; here a leave's and a fencing's
        # too (a timeout's), since those move partitions as much
        consumer_rebalances = CounterMetricFamily(
            "kafka_server_groupcoordinatormetrics_consumer_group_rebalance",
            "Consumer groups (KIP-848): group epoch bumps (a member joined, left or was fenced, a subscription or "
            "subscribed topic changed), per group", labels=["group"])
        for group, count in self.consumer_group_rebalances.items():
            consumer_rebalances.add_metric([group], count)
        yield consumer_rebalances
        for sampled in self._sampled:
            yield from sampled()

    def _request_families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests served, per API and version", labels=["request", "version"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors", "Error codes in responses, per API and "
                                     "error (NONE included), one per partition", labels=["request", "error"])
        latencies = [HistogramMetricFamily(name, doc, labels=["request"]) for name, doc in LATENCIES]
        for stats in self.apis.values():
            for version, count in sorted(stats.requests.items()):
                requests.add_metric([stats.name, str(version)], count)
            for code, count in sorted(stats.errors.items()):
                errors.add_metric([stats.name, _ERROR_NAMES.get(code, str(code))], count)
            for family, latency in zip(latencies, stats.latencies, strict=True):
                cumulative, buckets = 0, []
                for label, count in zip(_BUCKET_LABELS, latency.counts, strict=True):
                    cumulative += count
                    buckets.append((label, cumulative))
                family.add_metric([stats.name], buckets, latency.sum)
        yield requests
        yield errors
        yield from latencies

    def exposition(self) -> bytes:
        """The Prometheus text format (0.0.4) of `families()`."""
        lines: list[str] = []
        for family in self.families():
            name = f"{family.name}_total" if family.type == "counter" else family.name  # as 0.0.4 names a counter
            lines.append(f"# HELP {name} {_escape_help(family.documentation)}\n# TYPE {name} {family.type}\n")
            lines.extend(f"{sample.name}{_labels(sample.labels)} {_number(sample.value)}\n"
                         for sample in family.samples)
        return "".join(lines).encode()


class _Families(Collector):
    def __init__(self, metrics: ProcessMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics.families()


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape_label(value)}"' for key, value in labels.items()) + "}"


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() else repr(value)


# Where a response holds error codes: ("error_code", None), or (an array of structs, the same inside it).
ErrorPaths = list[tuple[str, "ErrorPaths | None"]]


def _error_paths(fields: list[Field]) -> ErrorPaths:
    paths: ErrorPaths = []
    for f in fields:
        if f.name == "error_code":
            paths.append((f.name, None))
        elif f.is_array and f.is_struct and (nested := _error_paths(f.fields or [])):
            paths.append((f.name, nested))
    return paths


def _count(message: Any, paths: ErrorPaths, counts: dict[int, int]) -> None:
    for name, nested in paths:
        if nested is None:
            code = int(message.error_code)
            counts[code] = counts.get(code, 0) + 1
        else:
            for item in getattr(message, name, None) or ():
                _count(item, nested, counts)


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def consumer_lag(broker: BrokerServices) -> Iterator[tuple[str, str, int, int, int | None]]:
    """(group, topic, partition, committed offset, lag) of every committed offset this broker coordinates; the
    lag is the high watermark of the replica hosted here less the committed offset (None when no replica of the
    partition is hosted here)."""
    coordinator = broker.group_coordinator_if_started
    if coordinator is None:
        return
    replicas = broker.replica_manager
    for group_id, (topic, index), committed in coordinator.committed_offsets():
        partition = replicas.get(topic, index)
        lag = None if partition is None else max(partition.log.high_watermark - committed.offset, 0)
        yield group_id, topic, index, committed.offset, lag


def _broker_families(broker: BrokerServices, connections: int) -> Iterator[Metric]:
    partitions = list(broker.replica_manager.partitions.values())
    led = [p for p in partitions if p.is_leader]
    yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions hosted here",
                            value=len(partitions))
    yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led here", value=len(led))
    yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                            "Partitions led here whose ISR is smaller than their replica set",
                            value=sum(p.under_replicated for p in led))
    yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                            "Partitions led here whose ISR is smaller than min.insync.replicas",
                            value=sum(p.under_min_isr for p in led))
    yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count", "Open client connections",
                            value=connections)
    yield GaugeMetricFamily("kafka_server_metadata_lastappliedrecordoffset",
                            "Offset of the last metadata record this broker applied",
                            value=broker.metadata.metadata_offset)
    labels = ("topic", "partition")
    epoch = _gauge("kafka_cluster_partition_leaderepoch", "Leader epoch of each partition hosted here", labels)
    under = _gauge("kafka_cluster_partition_underreplicated", "1 if the partition, led here, is under-replicated",
                   labels)
    size = _gauge("kafka_log_log_size", "Bytes of the partition's log segments", labels)
    end = _gauge("kafka_log_log_logendoffset", "Log end offset", labels)
    start = _gauge("kafka_log_log_logstartoffset", "Log start offset", labels)
    high_watermark = _gauge("kafka_log_log_highwatermark", "High watermark", labels)
    follower_lag = _gauge("kafka_cluster_partition_followerlag",
                          "Offsets a follower lacks of the leader's log (leader side; the log end when the "
                          "follower has not fetched in this leader epoch)", (*labels, "replica"))
    for partition in partitions:
        key = [partition.topic, str(partition.index)]
        partition_log = partition.log
        log_end = partition_log.log_end_offset
        epoch.add_metric(key, partition.leader_epoch)
        size.add_metric(key, partition_log.size)
        end.add_metric(key, log_end)
        start.add_metric(key, partition_log.log_start_offset)
        high_watermark.add_metric(key, partition_log.high_watermark)
        if partition.is_leader:
            under.add_metric(key, int(partition.under_replicated))
            for replica, lag in partition.follower_lags().items():
                follower_lag.add_metric([*key, str(replica)], lag)
    yield from (epoch, under, size, end, start, high_watermark, follower_lag)
    yield from _group_families(broker)
    group_labels = ("consumergroup", "topic", "partition")
    current = _gauge("kafka_consumergroup_current_offset", "Committed offset, per group and partition", group_labels)
    lag_family = _gauge("kafka_consumergroup_lag",
                        "High watermark less the committed offset (partitions with a replica here)", group_labels)
    for group_id, topic, index, committed, group_lag in consumer_lag(broker):
        key = [group_id, topic, str(index)]
        current.add_metric(key, committed)
        if group_lag is not None:
            lag_family.add_metric(key, group_lag)
    yield from (current, lag_family)


def _group_families(broker: BrokerServices) -> Iterator[Metric]:
    """Groups by type and state (Kafka's NumGroups counts classic groups, `consumer-group-count` consumer groups),
    and each consumer group's epochs."""
    coordinator = broker.group_coordinator_if_started
    groups = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                    "Classic groups coordinated here, per state", ("state",))
    by_type = _gauge("kafka_server_groupcoordinatormetrics_group_count", "Groups coordinated here, per protocol "
                     "(classic, consumer)", ("protocol",))
    consumer_groups = _gauge("kafka_server_groupcoordinatormetrics_consumer_group_count",
                             "Consumer groups (KIP-848) coordinated here, per state", ("state",))
    group_epoch = _gauge("kafka_server_groupcoordinatormetrics_consumer_group_epoch",
                         "Group epoch of each consumer group coordinated here", ("group",))
    assignment_epoch = _gauge("kafka_server_groupcoordinatormetrics_consumer_group_assignment_epoch",
                              "The group epoch each consumer group's target assignment was computed for (below the "
                              "group epoch while Assigning)", ("group",))
    counts: dict[tuple[str, str], int] = {}
    for group in coordinator.groups.values() if coordinator is not None else ():
        key = (group.type, group.state_name)
        counts[key] = counts.get(key, 0) + 1
        if isinstance(group, ConsumerGroup):
            group_epoch.add_metric([group.group_id], group.group_epoch)
            assignment_epoch.add_metric([group.group_id], group.assignment_epoch)
    # every type and consumer group state is shown, at 0 too, as Kafka registers one gauge per state
    totals = dict.fromkeys(("classic", "consumer"), 0)
    consumer_states = dict.fromkeys((state.value for state in ConsumerGroupState), 0)
    for (kind, state), count in sorted(counts.items()):
        totals[kind] = totals.get(kind, 0) + count
        if kind == "consumer":
            consumer_states[state] = count
        else:
            groups.add_metric([state], count)
    for kind, count in totals.items():
        by_type.add_metric([kind], count)
    for state, count in consumer_states.items():
        consumer_groups.add_metric([state], count)
    yield from (groups, by_type, consumer_groups, group_epoch, assignment_epoch)


def _controller_families(controller: Controller) -> Iterator[Metric]:
    image = controller.image
    states = [state for _, state in image.partitions()]
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                            "1: this process is the active controller", value=int(controller.active))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_activebrokercount", "Registered, unfenced brokers",
                            value=len(image.brokers) - len(image.fenced_brokers))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_fencedbrokercount", "Registered, fenced brokers",
                            value=len(image.fenced_brokers))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount", "Topics",
                            value=len(image.topics_by_id))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions", value=len(states))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions with no leader",
                            value=sum(state.leader < 0 for state in states))
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_lastcommittedrecordoffset",
                            "Offset of the last record in the metadata log", value=controller.committed_offset - 1)

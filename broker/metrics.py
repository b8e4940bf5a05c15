"""The Prometheus metrics of one broker or controller process: every metric is declared here, once.

Names are Kafka's JMX names mapped the way the Prometheus JMX exporter's Kafka rules map them: the MBean
`kafka.<domain>:type=<Type>,name=<Name>` becomes `kafka_<domain>_<type>_<name>` in lower case, a `...PerSec`
meter a `_total` counter, its keys labels (`request`, `error`, `topic`, `partition`). What Kafka has no MBean
for (leader epochs, truncations, KIP-207 refusals, fenced fetches) takes the same shape under Kafka's nearest
type; consumer lag uses kafka_exporter's names. Kafka's own-metrics (`kafka.server:type=<group>`, attribute
`<name>`, as KIP-848's `group-coordinator-metrics`) map the way `socket-server-metrics` does: the group's hyphens
dropped, the name's become underscores (`kafka_server_groupcoordinatormetrics_consumer_group_count`).

Every family is one row of `CATALOGUE` (name, type, labels, HELP, the Kafka metric it maps): the families a scrape
yields are made from it (`family`), docs/metrics.md is generated from it (`render_reference`, `make docs`), and
a test checks that a process exports exactly the catalogue.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from epoch_broker.broker.client_metrics import kafka_uuid_text
from epoch_broker.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupState
from epoch_broker.broker.groups.share_group import ShareGroupState
from epoch_broker.broker.metadata.records import PartitionChangeRecord
from epoch_broker.broker.reference import table
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.schema import Api, Field

if TYPE_CHECKING:
    from epoch_broker.broker.controller.controller import Controller
    from epoch_broker.broker.services import BrokerServices

# Request latency buckets (ms): from a local append to a long poll's max wait.
LATENCY_BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BUCKET_LABELS = [*(str(float(bound)) for bound in LATENCY_BUCKETS_MS), "+Inf"]
_ERROR_NAMES = {code.value: code.name for code in ErrorCode}


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric family: what /metrics says of it (name, type, labels, HELP) and the Kafka metric it maps."""

    name: str  # the family's name; a counter's samples (and its HELP and TYPE lines) add `_total`
    type: str  # "counter", "gauge" or "histogram"
    labels: tuple[str, ...]
    help: str
    kafka: str = ""  # Kafka's MBean `<Type> <Name>` (or own-metric `<group> <name>`) it maps; "" where Kafka has none

    @property
    def exposed(self) -> str:
        """The name a scrape shows (and a query uses)."""
        return f"{self.name}_total" if self.type == "counter" else self.name


_TP = ("topic", "partition")
_GROUP_TP = ("consumergroup", "topic", "partition")
_SHARE_TP = ("group", "topic", "partition")
CATALOGUE: tuple[MetricSpec, ...] = (
    # counted where they happen
    MetricSpec("kafka_network_requestmetrics_requests", "counter", ("request", "version"),
               "Requests served, per API and version", "RequestMetrics RequestsPerSec"),
    MetricSpec("kafka_network_requestmetrics_errors", "counter", ("request", "error"),
               "Error codes in responses, per API and error (NONE included), one per partition",
               "RequestMetrics ErrorsPerSec"),
    MetricSpec("kafka_network_requestmetrics_totaltimems", "histogram", ("request",),
               "Request time from the read of its frame to its response encoded for the socket (ms)",
               "RequestMetrics TotalTimeMs"),
    MetricSpec("kafka_network_requestmetrics_requestqueuetimems", "histogram", ("request",),
               "Time a read request waited before its handler ran: behind the connection's request in flight, for "
               "the broker to be ready, a fault hook's delay (ms)", "RequestMetrics RequestQueueTimeMs"),
    MetricSpec("kafka_network_requestmetrics_localtimems", "histogram", ("request",),
               "Handler time, less the remote wait (ms)", "RequestMetrics LocalTimeMs"),
    MetricSpec("kafka_network_requestmetrics_remotetimems", "histogram", ("request",),
               "Time waiting on others: acks=all replication, a Fetch long poll (ms)", "RequestMetrics RemoteTimeMs"),
    MetricSpec("kafka_server_brokertopicmetrics_bytesin", "counter", ("topic",), "Bytes produced, per topic",
               "BrokerTopicMetrics BytesInPerSec"),
    MetricSpec("kafka_server_brokertopicmetrics_messagesin", "counter", ("topic",), "Records produced, per topic",
               "BrokerTopicMetrics MessagesInPerSec"),
    MetricSpec("kafka_server_brokertopicmetrics_bytesout", "counter", ("topic",),
               "Bytes fetched by consumers, per topic", "BrokerTopicMetrics BytesOutPerSec"),
    MetricSpec("kafka_server_brokertopicmetrics_replicationbytesin", "counter", ("topic",),
               "Bytes appended as a follower, per topic", "BrokerTopicMetrics ReplicationBytesInPerSec"),
    MetricSpec("kafka_server_brokertopicmetrics_replicationbytesout", "counter", ("topic",),
               "Bytes fetched by follower replicas, per topic", "BrokerTopicMetrics ReplicationBytesOutPerSec"),
    MetricSpec("kafka_server_replicamanager_fencedfetches", "counter", ("topic", "fetcher"),
               "Fetches refused FENCED_LEADER_EPOCH (KIP-320), per topic and fetcher kind"),
    MetricSpec("kafka_server_replicamanager_offsetnotavailable", "counter", ("topic",),
               "ListOffsets refused OFFSET_NOT_AVAILABLE while a new leader's high watermark catches up (KIP-207), "
               "per topic"),
    MetricSpec("kafka_server_replicafetchermanager_truncations", "counter", ("topic",),
               "Follower truncations that cut records (KIP-101), per topic"),
    MetricSpec("kafka_server_replicafetchermanager_truncatedrecords", "counter", ("topic",),
               "Offsets cut by follower truncations, per topic"),
    MetricSpec("kafka_server_replicamanager_isrshrinks", "counter", (),
               "ISR shrinks this broker asked for and the controller committed (as leader)",
               "ReplicaManager IsrShrinksPerSec"),
    MetricSpec("kafka_server_replicamanager_isrexpands", "counter", (),
               "ISR expansions this broker asked for and the controller committed (as leader)",
               "ReplicaManager IsrExpandsPerSec"),
    MetricSpec("kafka_controller_controllerstats_leaderelections", "counter", (),
               "Leader changes to a live broker committed by the controller",
               "ControllerStats LeaderElectionRateAndTimeMs (its count)"),
    MetricSpec("kafka_controller_controllerstats_uncleanleaderelections", "counter", (),
               "Elections of a leader from outside the ISR", "ControllerStats UncleanLeaderElectionsPerSec"),
    MetricSpec("kafka_controller_controllerstats_isrshrinks", "counter", (),
               "ISR shrinks committed by the controller, for any reason (a fencing too)"),
    MetricSpec("kafka_controller_controllerstats_isrexpands", "counter", (),
               "ISR expansions committed by the controller"),
    MetricSpec("kafka_coordinator_group_groupmetadatamanager_rebalances", "counter", ("group",),
               "Rebalances completed (a new generation), per group"),
    # Kafka's consumer-group-rebalance-count counts the bumps a heartbeat decides; here a leave's and a fencing's
    # too (a timeout's), since those move partitions as much
    MetricSpec("kafka_server_groupcoordinatormetrics_consumer_group_rebalance", "counter", ("group",),
               "Consumer groups (KIP-848): group epoch bumps (a member joined, left or was fenced, a subscription "
               "or subscribed topic changed), per group", "group-coordinator-metrics consumer-group-rebalance-count"),
    # read at scrape time: a broker's
    MetricSpec("kafka_server_replicamanager_partitioncount", "gauge", (), "Partitions hosted here",
               "ReplicaManager PartitionCount"),
    MetricSpec("kafka_server_replicamanager_leadercount", "gauge", (), "Partitions led here",
               "ReplicaManager LeaderCount"),
    MetricSpec("kafka_server_replicamanager_underreplicatedpartitions", "gauge", (),
               "Partitions led here whose ISR is smaller than their replica set",
               "ReplicaManager UnderReplicatedPartitions"),
    MetricSpec("kafka_server_replicamanager_underminisrpartitioncount", "gauge", (),
               "Partitions led here whose ISR is smaller than min.insync.replicas",
               "ReplicaManager UnderMinIsrPartitionCount"),
    MetricSpec("kafka_server_socketservermetrics_connection_count", "gauge", (), "Open client connections",
               "socket-server-metrics connection-count"),
    MetricSpec("kafka_server_metadata_lastappliedrecordoffset", "gauge", (),
               "Offset of the last metadata record this broker applied",
               "broker-metadata-metrics last-applied-record-offset"),
    MetricSpec("kafka_cluster_partition_leaderepoch", "gauge", _TP, "Leader epoch of each partition hosted here"),
    MetricSpec("kafka_cluster_partition_underreplicated", "gauge", _TP,
               "1 if the partition, led here, is under-replicated", "Partition UnderReplicated"),
    MetricSpec("kafka_log_log_size", "gauge", _TP, "Bytes of the partition's log segments", "Log Size"),
    MetricSpec("kafka_log_log_logendoffset", "gauge", _TP, "Log end offset", "Log LogEndOffset"),
    MetricSpec("kafka_log_log_logstartoffset", "gauge", _TP, "Log start offset", "Log LogStartOffset"),
    MetricSpec("kafka_log_log_highwatermark", "gauge", _TP, "High watermark"),
    MetricSpec("kafka_cluster_partition_followerlag", "gauge", (*_TP, "replica"),
               "Offsets a follower lacks of the leader's log (leader side; the log end when the follower has not "
               "fetched in this leader epoch)"),
    MetricSpec("kafka_coordinator_group_groupmetadatamanager_numgroups", "gauge", ("state",),
               "Classic groups coordinated here, per state", "GroupMetadataManager NumGroups"),
    MetricSpec("kafka_server_groupcoordinatormetrics_group_count", "gauge", ("protocol",),
               "Groups coordinated here, per protocol (classic, consumer, share)",
               "group-coordinator-metrics group-count"),
    MetricSpec("kafka_server_groupcoordinatormetrics_share_group_count", "gauge", ("state",),
               "Share groups (KIP-932) coordinated here, per state", "group-coordinator-metrics share-group-count"),
    MetricSpec("epoch_broker_share_partition_start_offset", "gauge", _SHARE_TP,
               "A share group's share-partition start offset (SPSO) on each partition led here: every record below "
               "it is acknowledged or archived"),
    MetricSpec("epoch_broker_share_partition_end_offset", "gauge", _SHARE_TP,
               "A share group's share-partition end offset (SPEO) on each partition led here: the offset after its "
               "last in-flight record"),
    MetricSpec("kafka_server_sharepartitionmetrics_inflightmessagecount", "gauge", _SHARE_TP,
               "In-flight records (between SPSO and SPEO) of a share group on each partition led here",
               "SharePartitionMetrics InFlightMessageCount"),
    MetricSpec("epoch_broker_share_partition_acquired_records", "gauge", _SHARE_TP,
               "Records a share group's members hold under an acquisition lock, per partition led here"),
    MetricSpec("kafka_server_groupcoordinatormetrics_consumer_group_count", "gauge", ("state",),
               "Consumer groups (KIP-848) coordinated here, per state",
               "group-coordinator-metrics consumer-group-count"),
    MetricSpec("kafka_server_groupcoordinatormetrics_consumer_group_epoch", "gauge", ("group",),
               "Group epoch of each consumer group coordinated here"),
    MetricSpec("kafka_server_groupcoordinatormetrics_consumer_group_assignment_epoch", "gauge", ("group",),
               "The group epoch each consumer group's target assignment was computed for (below the group epoch "
               "while Assigning)"),
    MetricSpec("kafka_consumergroup_current_offset", "gauge", _GROUP_TP, "Committed offset, per group and partition",
               "kafka_exporter kafka_consumergroup_current_offset"),
    MetricSpec("kafka_consumergroup_lag", "gauge", _GROUP_TP,
               "High watermark less the committed offset (partitions with a replica here)",
               "kafka_exporter kafka_consumergroup_lag"),
    MetricSpec("epoch_broker_client_metric", "gauge", ("client_id", "client_instance_id", "name", "attributes"),
               "The latest value each client instance pushed (KIP-714 PushTelemetry, gauges and sums) of each metric "
               "its subscription asks for; attributes: the data point's, `key=value` comma-separated",
               "ClientTelemetryReceiver (Kafka exports pushed metrics through a plugin only)"),
    # read at scrape time: a controller's
    MetricSpec("kafka_controller_kafkacontroller_activecontrollercount", "gauge", (),
               "1: this process is the active controller", "KafkaController ActiveControllerCount"),
    MetricSpec("kafka_controller_kafkacontroller_activebrokercount", "gauge", (), "Registered, unfenced brokers",
               "KafkaController ActiveBrokerCount"),
    MetricSpec("kafka_controller_kafkacontroller_fencedbrokercount", "gauge", (), "Registered, fenced brokers",
               "KafkaController FencedBrokerCount"),
    MetricSpec("kafka_controller_kafkacontroller_globaltopiccount", "gauge", (), "Topics",
               "KafkaController GlobalTopicCount"),
    MetricSpec("kafka_controller_kafkacontroller_globalpartitioncount", "gauge", (), "Partitions",
               "KafkaController GlobalPartitionCount"),
    MetricSpec("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", (), "Partitions with no leader",
               "KafkaController OfflinePartitionsCount"),
    MetricSpec("kafka_controller_kafkacontroller_lastcommittedrecordoffset", "gauge", (),
               "Offset of the last record in the metadata log", "KafkaController LastCommittedRecordOffset"),
)
METRICS = {spec.name: spec for spec in CATALOGUE}
_FAMILY_TYPES = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}

# kafka.network:type=RequestMetrics latencies, in the order ApiStats.latencies holds them
LATENCIES = ("kafka_network_requestmetrics_totaltimems", "kafka_network_requestmetrics_requestqueuetimems",
             "kafka_network_requestmetrics_localtimems", "kafka_network_requestmetrics_remotetimems")
# Per-topic counters: (TopicStats attribute, family, the family's further labels' values)
TOPIC_COUNTERS = (
    ("bytes_in", "kafka_server_brokertopicmetrics_bytesin", ()),
    ("messages_in", "kafka_server_brokertopicmetrics_messagesin", ()),
    ("bytes_out", "kafka_server_brokertopicmetrics_bytesout", ()),
    ("replication_bytes_in", "kafka_server_brokertopicmetrics_replicationbytesin", ()),
    ("replication_bytes_out", "kafka_server_brokertopicmetrics_replicationbytesout", ()),
    ("fenced_consumer_fetches", "kafka_server_replicamanager_fencedfetches", ("consumer",)),
    ("fenced_follower_fetches", "kafka_server_replicamanager_fencedfetches", ("follower",)),
    ("offsets_not_available", "kafka_server_replicamanager_offsetnotavailable", ()),
    ("truncations", "kafka_server_replicafetchermanager_truncations", ()),
    ("truncated_records", "kafka_server_replicafetchermanager_truncatedrecords", ()),
)
# Process-wide counters: (key in ProcessMetrics.counters, family)
COUNTERS = (
    ("isr_shrinks", "kafka_server_replicamanager_isrshrinks"),
    ("isr_expands", "kafka_server_replicamanager_isrexpands"),
    ("elections", "kafka_controller_controllerstats_leaderelections"),
    ("unclean_elections", "kafka_controller_controllerstats_uncleanleaderelections"),
    ("controller_isr_shrinks", "kafka_controller_controllerstats_isrshrinks"),
    ("controller_isr_expands", "kafka_controller_controllerstats_isrexpands"),
)


def family(name: str, value: float | None = None) -> Any:
    """An empty family of the catalogue's metric `name`; `value`: the one sample of a metric without labels."""
    spec = METRICS[name]
    if value is not None:
        return _FAMILY_TYPES[spec.type](name, spec.help, value=value)
    return _FAMILY_TYPES[spec.type](name, spec.help, labels=list(spec.labels))


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
        self.counters = dict.fromkeys((key for key, _ in COUNTERS), 0)
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
        for attribute, name, extra in TOPIC_COUNTERS:
            topic_family = by_name.get(name)
            if topic_family is None:
                topic_family = by_name[name] = family(name)
            for topic, stats in self.topics.items():
                topic_family.add_metric([topic, *extra], getattr(stats, attribute))
        yield from by_name.values()
        for key, name in COUNTERS:
            yield family(name, self.counters[key])
        rebalances = family("kafka_coordinator_group_groupmetadatamanager_rebalances")
        for group, count in self.rebalances.items():
            rebalances.add_metric([group], count)
        yield rebalances
        consumer_rebalances = family("kafka_server_groupcoordinatormetrics_consumer_group_rebalance")
        for group, count in self.consumer_group_rebalances.items():
            consumer_rebalances.add_metric([group], count)
        yield consumer_rebalances
        for sampled in self._sampled:
            yield from sampled()

    def _request_families(self) -> Iterator[Metric]:
        requests = family("kafka_network_requestmetrics_requests")
        errors = family("kafka_network_requestmetrics_errors")
        latencies = [family(name) for name in LATENCIES]
        for stats in self.apis.values():
            for version, count in sorted(stats.requests.items()):
                requests.add_metric([stats.name, str(version)], count)
            for code, count in sorted(stats.errors.items()):
                errors.add_metric([stats.name, _ERROR_NAMES.get(code, str(code))], count)
            for histogram, latency in zip(latencies, stats.latencies, strict=True):
                cumulative, buckets = 0, []
                for label, count in zip(_BUCKET_LABELS, latency.counts, strict=True):
                    cumulative += count
                    buckets.append((label, cumulative))
                histogram.add_metric([stats.name], buckets, latency.sum)
        yield requests
        yield errors
        yield from latencies

    def exposition(self) -> bytes:
        """The Prometheus text format (0.0.4) of `families()`."""
        lines: list[str] = []
        for metric in self.families():
            name = f"{metric.name}_total" if metric.type == "counter" else metric.name  # as 0.0.4 names a counter
            lines.append(f"# HELP {name} {_escape_help(metric.documentation)}\n# TYPE {name} {metric.type}\n")
            lines.extend(f"{sample.name}{_labels(sample.labels)} {_number(sample.value)}\n"
                         for sample in metric.samples)
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
    yield family("kafka_server_replicamanager_partitioncount", len(partitions))
    yield family("kafka_server_replicamanager_leadercount", len(led))
    yield family("kafka_server_replicamanager_underreplicatedpartitions", sum(p.under_replicated for p in led))
    yield family("kafka_server_replicamanager_underminisrpartitioncount", sum(p.under_min_isr for p in led))
    yield family("kafka_server_socketservermetrics_connection_count", connections)
    yield family("kafka_server_metadata_lastappliedrecordoffset", broker.metadata.metadata_offset)
    epoch = family("kafka_cluster_partition_leaderepoch")
    under = family("kafka_cluster_partition_underreplicated")
    size = family("kafka_log_log_size")
    end = family("kafka_log_log_logendoffset")
    start = family("kafka_log_log_logstartoffset")
    high_watermark = family("kafka_log_log_highwatermark")
    follower_lag = family("kafka_cluster_partition_followerlag")
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
    yield from _share_partition_families(led)
    yield from _group_families(broker)
    current = family("kafka_consumergroup_current_offset")
    lag_family = family("kafka_consumergroup_lag")
    for group_id, topic, index, committed, group_lag in consumer_lag(broker):
        key = [group_id, topic, str(index)]
        current.add_metric(key, committed)
        if group_lag is not None:
            lag_family.add_metric(key, group_lag)
    yield from (current, lag_family)
    pushed = family("epoch_broker_client_metric")
    for instance in broker.client_metrics.live_instances():
        instance_id = kafka_uuid_text(instance.instance_id)
        for point in instance.points:
            attributes = ",".join(f"{key}={value}" for key, value in point.attributes)
            pushed.add_metric([instance.client_id, instance_id, point.name, attributes], point.value)
    yield pushed


def _share_partition_families(led: list[Any]) -> Iterator[Metric]:
    share_start = family("epoch_broker_share_partition_start_offset")
    share_end = family("epoch_broker_share_partition_end_offset")
    in_flight = family("kafka_server_sharepartitionmetrics_inflightmessagecount")
    acquired = family("epoch_broker_share_partition_acquired_records")
    for partition in led:
        for group_id, share in partition.share_partitions.items():
            key = [group_id, partition.topic, str(partition.index)]
            share_start.add_metric(key, share.start_offset)
            share_end.add_metric(key, share.end_offset)
            in_flight.add_metric(key, share.in_flight_count)
            acquired.add_metric(key, share.acquired_count)
    yield from (share_start, share_end, in_flight, acquired)


def _group_families(broker: BrokerServices) -> Iterator[Metric]:
    """Groups by type and state (Kafka's NumGroups counts classic groups, `consumer-group-count` consumer groups),
    and each consumer group's epochs."""
    coordinator = broker.group_coordinator_if_started
    groups = family("kafka_coordinator_group_groupmetadatamanager_numgroups")
    by_type = family("kafka_server_groupcoordinatormetrics_group_count")
    consumer_groups = family("kafka_server_groupcoordinatormetrics_consumer_group_count")
    share_groups = family("kafka_server_groupcoordinatormetrics_share_group_count")
    group_epoch = family("kafka_server_groupcoordinatormetrics_consumer_group_epoch")
    assignment_epoch = family("kafka_server_groupcoordinatormetrics_consumer_group_assignment_epoch")
    counts: dict[tuple[str, str], int] = {}
    for group in coordinator.groups.values() if coordinator is not None else ():
        key = (group.type, group.state_name)
        counts[key] = counts.get(key, 0) + 1
        if isinstance(group, ConsumerGroup):
            group_epoch.add_metric([group.group_id], group.group_epoch)
            assignment_epoch.add_metric([group.group_id], group.assignment_epoch)
    # every type and consumer group state is shown, at 0 too, as Kafka registers one gauge per state
    totals = dict.fromkeys(("classic", "consumer", "share"), 0)
    consumer_states = dict.fromkeys((state.value for state in ConsumerGroupState), 0)
    share_states = dict.fromkeys((state.value for state in ShareGroupState), 0)
    for (kind, state), count in sorted(counts.items()):
        totals[kind] = totals.get(kind, 0) + count
        if kind == "consumer":
            consumer_states[state] = count
        elif kind == "share":
            share_states[state] = count
        else:
            groups.add_metric([state], count)
    for kind, count in totals.items():
        by_type.add_metric([kind], count)
    for state, count in consumer_states.items():
        consumer_groups.add_metric([state], count)
    for state, count in share_states.items():
        share_groups.add_metric([state], count)
    yield from (groups, by_type, consumer_groups, share_groups, group_epoch, assignment_epoch)


def _controller_families(controller: Controller) -> Iterator[Metric]:
    image = controller.image
    states = [state for _, state in image.partitions()]
    yield family("kafka_controller_kafkacontroller_activecontrollercount", int(controller.active))
    yield family("kafka_controller_kafkacontroller_activebrokercount", len(image.brokers) - len(image.fenced_brokers))
    yield family("kafka_controller_kafkacontroller_fencedbrokercount", len(image.fenced_brokers))
    yield family("kafka_controller_kafkacontroller_globaltopiccount", len(image.topics_by_id))
    yield family("kafka_controller_kafkacontroller_globalpartitioncount", len(states))
    yield family("kafka_controller_kafkacontroller_offlinepartitionscount", sum(state.leader < 0 for state in states))
    yield family("kafka_controller_kafkacontroller_lastcommittedrecordoffset", controller.committed_offset - 1)


def render_reference() -> str:
    """docs/metrics.md: every family of the catalogue."""
    rows = ((f"`{spec.exposed}`", spec.type, ", ".join(spec.labels), spec.help, spec.kafka or "none (this project's)")
            for spec in CATALOGUE)
    buckets = ", ".join(f"{bound:g}" for bound in LATENCY_BUCKETS_MS)
    return f"""# Metrics

Every Prometheus metric family a broker or controller process serves at `/metrics` once `metrics.listener` is set
(`--override metrics.listener=http://127.0.0.1:9644`): its name as a query names it, type, labels, what it counts
and the Kafka metric it stands for. [observability.md](observability.md) shows how to scrape them and the status
page beside them.

{table(("metric", "type", "labels", "what it counts", "Kafka's"), rows)}

Names are Kafka's JMX names mapped the way the Prometheus JMX exporter's Kafka rules map them: the MBean
`kafka.<domain>:type=<Type>,name=<Name>` becomes `kafka_<domain>_<type>_<name>` in lower case, a `...PerSec` meter
a `_total` counter, its keys labels. Kafka's own-metrics groups (`socket-server-metrics`,
`group-coordinator-metrics`) lose their hyphens, their names' become underscores. Where Kafka has no metric (leader
epochs, truncations, KIP-207 refusals, fenced fetches) the family takes the same shape under Kafka's nearest type;
consumer lag takes kafka_exporter's names. Latencies are histograms in milliseconds, with the buckets {buckets}.
Counters count from the process's start; a process counts what happens in it, so the controller's counters and
gauges come from the controller process (or the broker that embeds it).
"""

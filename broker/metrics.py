"""The Prometheus metrics of one broker or controller process: every instrument is declared here, once.

Names are Kafka's JMX names mapped the way the Prometheus JMX exporter's Kafka rules map them: the MBean
`kafka.<domain>:type=<Type>,name=<Name>` becomes `kafka_<domain>_<type>_<name>` in lower case, a `...PerSec`
meter a `_total` counter, its keys labels (`request`, `error`, `topic`, `partition`). What Kafka has no MBean
for (leader epochs, truncations, KIP-207 refusals, fenced fetches) takes the same shape under Kafka's nearest
type; consumer lag uses kafka_exporter's names. docs/observability.md has the table.

Rules:
- One `CollectorRegistry` per `ProcessMetrics`: several brokers in one test process never share a counter.
- Events are counted where they happen (the dispatcher, `Partition`, the replica manager, the controller's
  commit, the group coordinator) by the `record_*` methods below, which keep each label set's child: counting
  is a dict lookup and an add.
- State (partition counts, log offsets and sizes, leader epochs, follower and consumer lag, group states,
  fenced brokers) is read at scrape time by collectors from the state the event loop owns. The scrape runs on
  the loop (broker/status.py), so it sees one consistent state, and nothing is kept twice.
- A process without `metrics.listener` has no `ProcessMetrics` (its owners hold None and count nothing), and
  never imports prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from epoch_broker.broker.metadata.records import PartitionChangeRecord
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.schema import Api, Field
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from epoch_broker.broker.controller.controller import Controller
    from epoch_broker.broker.services import BrokerServices

# Request latency buckets (ms): from a local append to a long poll's max wait.
LATENCY_BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_ERROR_NAMES = {code.value: code.name for code in ErrorCode}
disable_created_metrics()  # no `_created` series: a scrape of many partitions stays half the size


class ProcessMetrics:
    """The registry of one process and its instruments."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=False)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def latency(name: str, doc: str) -> Histogram:
            return Histogram(name, doc, ("request",), registry=registry, buckets=LATENCY_BUCKETS_MS)

        # kafka.network:type=RequestMetrics
        self.requests = counter("kafka_network_requestmetrics_requests", "Requests served, per API and version",
                                ("request", "version"))
        self.errors = counter("kafka_network_requestmetrics_errors",
                              "Error codes in responses, per API and error (NONE included), one per partition",
                              ("request", "error"))
        self.total_time = latency("kafka_network_requestmetrics_totaltimems",
                                  "Request time from the read of its frame to its response encoded for the socket (ms)")
        self.queue_time = latency("kafka_network_requestmetrics_requestqueuetimems",
                                  "Time a read request waited before its handler ran: behind the connection's "
                                  "request in flight, for the broker to be ready, a fault hook's delay (ms)")
        self.local_time = latency("kafka_network_requestmetrics_localtimems",
                                  "Handler time, less the remote wait (ms)")
        self.remote_time = latency("kafka_network_requestmetrics_remotetimems",
                                   "Time waiting on others: acks=all replication, a Fetch long poll (ms)")
        # kafka.server:type=BrokerTopicMetrics
        self.bytes_in = counter("kafka_server_brokertopicmetrics_bytesin", "Bytes produced, per topic", ("topic",))
        self.messages_in = counter("kafka_server_brokertopicmetrics_messagesin", "Records produced, per topic",
                                   ("topic",))
        self.bytes_out = counter("kafka_server_brokertopicmetrics_bytesout", "Bytes fetched by consumers, per topic",
                                 ("topic",))
        self.replication_bytes_out = counter("kafka_server_brokertopicmetrics_replicationbytesout",
                                             "Bytes fetched by follower replicas, per topic", ("topic",))
        self.replication_bytes_in = counter("kafka_server_brokertopicmetrics_replicationbytesin",
                                            "Bytes appended as a follower, per topic", ("topic",))
        # kafka.server:type=ReplicaManager (this broker's own decisions as leader or follower)
        self.isr_shrinks = counter("kafka_server_replicamanager_isrshrinks",
                                   "ISR shrinks this broker asked for and the controller committed (as leader)")
        self.isr_expands = counter("kafka_server_replicamanager_isrexpands",
                                   "ISR expansions this broker asked for and the controller committed (as leader)")
        self.fenced_fetches = counter("kafka_server_replicamanager_fencedfetches",
                                      "Fetches refused FENCED_LEADER_EPOCH (KIP-320), per topic and fetcher kind",
                                      ("topic", "fetcher"))
        self.offsets_not_available = counter("kafka_server_replicamanager_offsetnotavailable",
                                             "ListOffsets refused OFFSET_NOT_AVAILABLE while a new leader's high "
                                             "watermark catches up (KIP-207), per topic", ("topic",))
        self.truncations = counter("kafka_server_replicafetchermanager_truncations",
                                   "Follower truncations that cut records (KIP-101), per topic", ("topic",))
        self.truncated_records = counter("kafka_server_replicafetchermanager_truncatedrecords",
                                         "Offsets cut by follower truncations, per topic", ("topic",))
        # kafka.controller:type=ControllerStats (the controller's commits)
        self.elections = counter("kafka_controller_controllerstats_leaderelections",
                                 "Leader changes to a live broker committed by the controller")
        self.unclean_elections = counter("kafka_controller_controllerstats_uncleanleaderelections",
                                         "Elections of a leader from outside the ISR")
        self.controller_isr_shrinks = counter("kafka_controller_controllerstats_isrshrinks",
                                              "ISR shrinks committed by the controller, for any reason (a fencing "
                                              "too)")
        self.controller_isr_expands = counter("kafka_controller_controllerstats_isrexpands",
                                              "ISR expansions committed by the controller")
        # kafka.coordinator.group:type=GroupMetadataManager
        self.rebalances = counter("kafka_coordinator_group_groupmetadatamanager_rebalances",
                                  "Rebalances completed (a new generation), per group", ("group",))
        self._request_children: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._error_children: dict[tuple[int, int], Any] = {}
        self._topic_children: dict[tuple[Counter, str], Any] = {}
        self._error_paths: dict[int, ErrorPaths] = {}

    # -- recording ----------------------------------------------------------------------------------

    def record_request(self, api: Api, version: int, response: Any, total_s: float, queue_s: float,
                       remote_s: float) -> None:
        """One request answered (`response` None when none was due: acks=0)."""
        children = self._request_children.get((api.key, version))
        if children is None:
            name = api.name
            children = self._request_children[(api.key, version)] = (
                self.requests.labels(name, str(version)), self.total_time.labels(name),
                self.queue_time.labels(name), self.local_time.labels(name), self.remote_time.labels(name))
        requests, total, queue, local, remote = children
        requests.inc()
        total.observe(total_s * 1000)
        queue.observe(queue_s * 1000)
        local.observe(max(total_s - queue_s - remote_s, 0.0) * 1000)
        remote.observe(remote_s * 1000)
        if response is not None:
            for code, count in self._count_errors(api, response).items():
                child = self._error_children.get((api.key, code))
                if child is None:
                    child = self._error_children[(api.key, code)] = self.errors.labels(
                        api.name, _ERROR_NAMES.get(code, str(code)))
                child.inc(count)

    def _count_errors(self, api: Api, response: Any) -> dict[int, int]:
        """Every error_code in the response, walked along the schema (the fields that hold one only)."""
        paths = self._error_paths.get(api.key)
        if paths is None:
            paths = self._error_paths[api.key] = _error_paths(api.response.fields)
        counts: dict[int, int] = {}
        _count(response, paths, counts)
        return counts

    def _topic_child(self, counter: Counter, topic: str) -> Any:
        child = self._topic_children.get((counter, topic))
        if child is None:
            child = self._topic_children[(counter, topic)] = counter.labels(topic)
        return child

    def record_produce(self, topic: str, size: int, records: int) -> None:
        self._topic_child(self.bytes_in, topic).inc(size)
        self._topic_child(self.messages_in, topic).inc(records)

    def record_fetch(self, topic: str, size: int, by_replica: bool) -> None:
        self._topic_child(self.replication_bytes_out if by_replica else self.bytes_out, topic).inc(size)

    def record_follower_append(self, topic: str, size: int) -> None:
        self._topic_child(self.replication_bytes_in, topic).inc(size)

    def record_isr_change(self, before: int, after: int) -> None:
        """An AlterPartition of this broker's was committed."""
        if after < before:
            self.isr_shrinks.inc()
        elif after > before:
            self.isr_expands.inc()

    def record_fenced_fetch(self, topic: str, by_replica: bool) -> None:
        self.fenced_fetches.labels(topic, "follower" if by_replica else "consumer").inc()

    def record_offset_not_available(self, topic: str) -> None:
        self._topic_child(self.offsets_not_available, topic).inc()

    def record_truncation(self, topic: str, records: int) -> None:
        self._topic_child(self.truncations, topic).inc()
        self._topic_child(self.truncated_records, topic).inc(records)

    def record_rebalance(self, group: str) -> None:
        self.rebalances.labels(group).inc()

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
                self.elections.inc()
                if record.leader not in state.isr:
                    self.unclean_elections.inc()
            if len(record.isr) < len(state.isr):
                self.controller_isr_shrinks.inc()
            elif len(record.isr) > len(state.isr):
                self.controller_isr_expands.inc()

    # -- state read at scrape time ------------------------------------------------------------------

    def watch_broker(self, broker: BrokerServices, connections: Callable[[], int]) -> None:
        self.registry.register(_Sampled(lambda: _broker_families(broker, connections())))

    def watch_controller(self, controller: Controller) -> None:
        self.registry.register(_Sampled(lambda: _controller_families(controller)))


class _Sampled(Collector):
    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families()


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
    for group in coordinator.groups.values():
        for (topic, index), committed in group.offsets.items():
            partition = replicas.get(topic, index)
            lag = None if partition is None else max(partition.log.high_watermark - committed.offset, 0)
            yield group.group_id, topic, index, committed.offset, lag


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
    coordinator = broker.group_coordinator_if_started
    groups = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                    "Groups coordinated here, per state", ("state",))
    by_state: dict[str, int] = {}
    for group in coordinator.groups.values() if coordinator is not None else ():
        by_state[str(group.state)] = by_state.get(str(group.state), 0) + 1
    for state, count in sorted(by_state.items()):
        groups.add_metric([state], count)
    yield groups
    labels = ("consumergroup", "topic", "partition")
    current = _gauge("kafka_consumergroup_current_offset", "Committed offset, per group and partition", labels)
    lag_family = _gauge("kafka_consumergroup_lag",
                        "High watermark less the committed offset (partitions with a replica here)", labels)
    for group_id, topic, index, committed, lag in consumer_lag(broker):
        key = [group_id, topic, str(index)]
        current.add_metric(key, committed)
        if lag is not None:
            lag_family.add_metric(key, lag)
    yield from (current, lag_family)


def _controller_families(controller: Controller) -> Iterator[Metric]:
    image = controller.image
    states = [state for _, state in image.partitions()]
    yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                            "1: this process is the active controller", value=1)
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
                            "Offset of the last record in the metadata log", value=controller.end_offset - 1)

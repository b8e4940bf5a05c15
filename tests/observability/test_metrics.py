"""`metrics.listener`: /metrics parses as Prometheus text and its counters move with what happened; /api/status
agrees with Metadata; bad HTTP gets HTTP errors and the broker serves on.

A broker in this process (restarted once, so that its partition is in leader epoch 1) answers real clients and
exact requests; a two-broker cluster goes through an ISR shrink, an unclean election with a truncation, a
fenced fetch, an ISR expansion and a leader kill, each process's metrics read from its own listener.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from epoch_broker import testing
from epoch_broker.broker import metrics
from epoch_broker.broker.status import MAX_CONNECTIONS
from epoch_broker.client.aio import KafkaClient
from epoch_broker.drill import admin
from epoch_broker.drill.launcher import CONTROLLER_NODE_ID
from epoch_broker.protocol.errors import ErrorCode
from tests.cluster import truncation_scenario as scenario
from tests.cluster.support import (
    fetch_request,
    offset_for_leader_epoch_request,
    start_cluster,
    wait_for,
    wait_state,
)
from tests.observability.consumer_group import consumer_group

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return answer.read().decode()


def scrape(url: str) -> Samples:
    """Every sample of `url`/metrics, parsed by prometheus_client's own parser: (name, labels) -> value."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(scrape_text(url)) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"record-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def test_a_broker_counts_requests_errors_and_records_and_its_status_agrees_with_metadata() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        topic = broker.create_topic("observed")
        produce(broker.bootstrap_servers, topic, 5)
        broker.restart()  # KIP-101: the returning leader leads epoch 1 from offset 5
        produce(broker.bootstrap_servers, topic, 5)

        async def exact_requests() -> tuple[Any, Any, admin.ClusterMetadata]:
            async with await KafkaClient.connect(broker.bootstrap_servers) as client:
                await client.negotiate()
                fenced = await fetch_request(client, topic, current_leader_epoch=0)
                unknown = await offset_for_leader_epoch_request(client, topic, version=4, current_leader_epoch=7,
                                                                leader_epoch=0)
            return fenced, unknown, await admin.fetch_metadata([broker.bootstrap_servers])

        fenced, unknown, metadata = asyncio.run(exact_requests())
        assert (fenced.error_code, unknown.error_code) == (ErrorCode.FENCED_LEADER_EPOCH,
                                                           ErrorCode.UNKNOWN_LEADER_EPOCH)
        samples = scrape(broker.metrics_url)

        # counted since the restart (a new process state): 5 records, and the two refusals
        assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 5
        assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 5 * len("record-0")
        assert value(samples, "kafka_network_requestmetrics_errors_total", request="Fetch",
                     error="FENCED_LEADER_EPOCH") == 1
        assert value(samples, "kafka_network_requestmetrics_errors_total", request="OffsetForLeaderEpoch",
                     error="UNKNOWN_LEADER_EPOCH") == 1
        assert value(samples, "kafka_server_replicamanager_fencedfetches_total", topic=topic, fetcher="consumer") == 1
        assert sum(v for (name, labels), v in samples.items() if name == "kafka_network_requestmetrics_requests_total"
                   and ("request", "Produce") in labels) >= 1
        assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
        assert value(samples, "kafka_cluster_partition_leaderepoch", topic=topic, partition="0") == 1
        assert value(samples, "kafka_log_log_logendoffset", topic=topic, partition="0") == 10
        assert value(samples, "kafka_log_log_highwatermark", topic=topic, partition="0") == 10
        assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1

        status = get_json(f"{broker.metrics_url}/api/status")
        (listed,) = [t for t in status["topics"] if t["name"] == topic]
        (partition,) = listed["partitions"]
        expected = metadata.partitions[(topic, 0)]
        assert (partition["leader"], partition["leader_epoch"], partition["replicas"], partition["isr"]) == (
            expected.leader, expected.leader_epoch, list(expected.replicas), list(expected.isr))
        assert partition["local"]["epoch_history"] == [{"epoch": 0, "start_offset": 0},
                                                       {"epoch": 1, "start_offset": 5}]
        assert (partition["local"]["log_end"], partition["local"]["high_watermark"]) == (10, 10)
        assert [b["id"] for b in status["brokers"]] == sorted(metadata.brokers)

        with urllib.request.urlopen(f"{broker.metrics_url}/", timeout=10) as page:
            assert page.headers["Content-Type"].startswith("text/html")
            assert b"api/status" in page.read()


def test_bad_http_gets_http_errors_and_the_broker_serves_on() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        for method, path, status in (("POST", "/metrics", 405), ("GET", "/nothing", 404),
                                     ("DELETE", "/api/status", 405)):
            request = urllib.request.Request(f"{broker.metrics_url}{path}", method=method, data=b"x" * 100)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == status
        assert value(scrape(broker.metrics_url), "kafka_server_replicamanager_partitioncount") == 0
        broker.create_topic("still-served")


def test_a_metrics_port_in_use_is_one_line_and_exit_status_2(tmp_path: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "epoch_broker", "serve", "--override", f"log.dirs={tmp_path}",
                              "--override", f"listeners=PLAINTEXT://127.0.0.1:{testing.free_port()}",
                              "--override", f"metrics.listener=http://127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert f"epoch-broker: metrics.listener http://127.0.0.1:{port}: " in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.slow
async def test_a_cluster_counts_isr_changes_elections_truncations_and_fenced_fetches(tmp_path: Any) -> None:
    cluster = start_cluster(tmp_path, brokers=2, metrics=True)
    try:
        a, b, topic = scenario.A, scenario.B, scenario.TOPIC
        old_epoch = await scenario.write_with_an_unreplicated_tail(cluster)
        assert value(scrape(cluster.metrics_url(a)), "kafka_server_replicamanager_isrshrinks_total") == 1

        epochs = await scenario.elect_b_uncleanly(cluster, old_epoch)
        on_a = scrape(cluster.metrics_url(a))
        assert value(on_a, "kafka_server_replicafetchermanager_truncations_total", topic=topic) == 1
        assert value(on_a, "kafka_server_replicafetchermanager_truncatedrecords_total", topic=topic) == 3
        on_controller = scrape(cluster.metrics_url(CONTROLLER_NODE_ID))
        assert value(on_controller, "kafka_controller_controllerstats_uncleanleaderelections_total") == 1

        async with cluster.client(b) as client:  # a consumer still in the old epoch (KIP-320)
            answer = await fetch_request(client, topic, current_leader_epoch=epochs.old)
        assert answer.error_code == ErrorCode.FENCED_LEADER_EPOCH
        await wait_state(cluster, topic, lambda s: s.isr == (b, a) or s.isr == (a, b), what="A back in the ISR",
                         timeout=15)
        on_b = scrape(cluster.metrics_url(b))
        assert value(on_b, "kafka_network_requestmetrics_errors_total", request="Fetch",
                     error="FENCED_LEADER_EPOCH") == 1
        assert value(on_b, "kafka_server_replicamanager_fencedfetches_total", topic=topic, fetcher="consumer") == 1
        assert value(on_b, "kafka_server_replicamanager_isrexpands_total") == 1
        assert value(on_b, "kafka_cluster_partition_leaderepoch", topic=topic, partition="0") == epochs.new

        elections = value(on_controller, "kafka_controller_controllerstats_leaderelections_total")
        shrinks = value(on_controller, "kafka_controller_controllerstats_isrshrinks_total")
        cluster.kill(b)  # the leader crashes: the controller fences it and elects A
        await wait_state(cluster, topic, lambda s: s.leader == a, what="A leads", node=a, timeout=15)

        def after_the_kill() -> Samples | None:
            samples = scrape(cluster.metrics_url(CONTROLLER_NODE_ID))
            return samples if value(samples, "kafka_controller_kafkacontroller_fencedbrokercount") == 1 else None

        on_controller = await wait_for(lambda: asyncio.to_thread(after_the_kill), timeout=15, what="B fenced")
        assert value(on_controller, "kafka_controller_controllerstats_leaderelections_total") == elections + 1
        assert value(on_controller, "kafka_controller_controllerstats_isrshrinks_total") == shrinks + 1
        assert value(on_controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

        status = await asyncio.to_thread(get_json, f"{cluster.metrics_url(a)}/api/status")
        (partition,) = next(t for t in status["topics"] if t["name"] == topic)["partitions"]
        history = [(e["epoch"], e["start_offset"]) for e in partition["local"]["epoch_history"]]
        assert history == [(epochs.old, 0), (epochs.new, scenario.KEPT), (partition["leader_epoch"], 8)]
        controller_view = await asyncio.to_thread(get_json, f"{cluster.metrics_url(CONTROLLER_NODE_ID)}/api/status")
        assert {broker["id"]: broker["fenced"] for broker in controller_view["brokers"]} == {a: False, b: True}
        assert controller_view["controller"]["fenced_brokers"] == 1
    except BaseException:
        print(cluster.log_tails())
        raise
    finally:
        cluster.stop()


def test_a_flood_of_connections_to_the_metrics_port_is_capped_and_scrapes_go_on() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        host, port = broker.metrics_url.removeprefix("http://").split(":")
        flood = [socket.create_connection((host, int(port)), timeout=10) for _ in range(3 * MAX_CONNECTIONS)]
        try:
            # past the cap, a connection is closed at once: it reads end-of-file
            closed = 0
            for sock in flood[MAX_CONNECTIONS:]:
                sock.settimeout(10)
                closed += sock.recv(1) == b""
            assert closed == 2 * MAX_CONNECTIONS
        finally:
            for sock in flood:
                sock.close()

        def scraped() -> Samples | None:
            try:
                return scrape(broker.metrics_url)
            except OSError:
                return None  # the flood's connections are still being closed

        samples = testing.wait_until(scraped, "a scrape after the flood")
        assert value(samples, "kafka_server_replicamanager_partitioncount") == 0


def test_the_fast_exposition_says_what_prometheus_clients_own_writer_says() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        topic = broker.create_topic("plain", 3)
        produce(broker.bootstrap_servers, topic, 3)
        odd_group = 'a "quoted" group\\with a backslash'  # label values to escape
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": odd_group})
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        consumer.close()
        ours_text = scrape_text(broker.metrics_url)
        reference_text = generate_latest(broker.server.metrics.registry).decode()
        ours = scrape(broker.metrics_url)
    families, reference_families = (
        {(family.name, family.type): {(sample.name, frozenset(sample.labels.items()))
                                      for sample in family.samples if not sample.name.endswith("_created")}
         for family in text_string_to_metric_families(text)} for text in (ours_text, reference_text))
    # the same families, typed alike, with the same series (their values move with the requests between the reads)
    assert families == reference_families
    assert value(ours, "kafka_consumergroup_current_offset", consumergroup=odd_group, topic=topic, partition="0") == 2


def test_a_consumer_group_shows_its_state_epochs_and_rebalances_and_its_members_assignments_in_the_status() -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        topic = broker.create_topic("watched", 6)
        with consumer_group(broker.bootstrap_servers, "watchers", topic, 6, members=2) as (first, second):

            def stable(epoch: int) -> Samples | None:
                samples = scrape(broker.metrics_url)
                stable = value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_count", state="Stable")
                at = value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_epoch", group="watchers")
                return samples if (stable, at) == (1, epoch) else None

            samples = testing.wait_until(lambda: stable(2), "the group Stable at epoch 2")
            # two joins, two epoch bumps: each is a rebalance; the group counts as a consumer group, not a classic one
            assert value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_epoch", group="watchers") == 2
            assert value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_assignment_epoch",
                         group="watchers") == 2
            assert value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_rebalance_total",
                         group="watchers") == 2
            assert value(samples, "kafka_server_groupcoordinatormetrics_group_count", protocol="consumer") == 1
            assert value(samples, "kafka_server_groupcoordinatormetrics_group_count", protocol="classic") == 0
            assert value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_count", state="Empty") == 0
            assert not any(name == "kafka_coordinator_group_groupmetadatamanager_numgroups" for name, _ in samples)

            (group,) = [g for g in get_json(f"{broker.metrics_url}/api/status")["groups"]
                        if g["group_id"] == "watchers"]
            assert (group["type"], group["state"], group["members"], group["protocol"]) == (
                "consumer", "Stable", 2, "uniform")
            assert (group["group_epoch"], group["assignment_epoch"]) == (2, 2)
            details = group["member_details"]
            assert {d["state"] for d in details} == {"stable"} and {d["member_epoch"] for d in details} == {2}
            assert all(d["pending_revocation"] == [] and d["assigned"] == d["target"] for d in details)
            held = sorted(p for d in details for a in d["assigned"] if a["topic"] == topic for p in a["partitions"])
            assert held == list(range(6))  # by topic name, every partition once
            by_member = {frozenset(p for a in d["assigned"] for p in a["partitions"]) for d in details}
            assert by_member == {frozenset(first.owns()), frozenset(second.owns())}

            first.close()  # a leave bumps the epoch: one more rebalance
            samples = testing.wait_until(lambda: stable(3), "the group Stable at epoch 3 after a leave")
            assert value(samples, "kafka_server_groupcoordinatormetrics_consumer_group_rebalance_total",
                         group="watchers") == 3


def test_a_process_exports_every_catalogued_metric_family_as_declared_and_no_other() -> None:
    """A broker with its embedded controller and a topic: each family of broker/metrics.py's CATALOGUE once, with
    the catalogue's type and HELP, and its samples with the catalogue's labels (docs/metrics.md is generated from
    the catalogue; tests/test_docs.py checks the page)."""
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        broker.create_topic("catalogued", partitions=2)
        exported = list(broker.server.metrics.families())
    names = [family.name for family in exported]
    assert len(names) == len(set(names)), "a family yielded twice"
    assert {family.name: (family.type, family.documentation) for family in exported} == {
        spec.name: (spec.type, spec.help) for spec in metrics.CATALOGUE}
    labels = {family.name: {tuple(key for key in sample.labels if key != "le") for sample in family.samples}
              for family in exported}
    assert {name: found for name, found in labels.items() if found - {metrics.METRICS[name].labels}} == {}
    assert labels["kafka_log_log_logendoffset"] == {("topic", "partition")}  # sampled: the check saw labels

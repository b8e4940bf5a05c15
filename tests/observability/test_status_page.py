"""The status page renders in a real browser: headless Chromium (Debian's `chromium`) loads `/` from a broker whose
partition went through two leader epochs and a group that committed offsets; the page's rows, epoch bands and
the history text come from `/api/status`; a KIP-848 consumer group of two members reading the same topic shows its
epochs and each member's partitions. A screenshot is kept under build/test-artifacts/. A share group (KIP-932)
whose ShareConsumer holds records shows its member and its share-partition's SPSO, SPEO, in-flight and acquired
records. The page also draws what a live broker rarely shows at once (status_sample.json, served as a static file):
a fenced broker, an offline partition, an epoch begun at the log end, deleted offsets, a fault hook, a consumer
group member revoking a partition and one waiting for a partition another member still holds, a share group of
three members on two share-partitions."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from PIL import Image

from epoch_broker import testing
from epoch_broker.broker.status import PAGE
from tests.helpers import ARTIFACTS, chromium
from tests.observability.consumer_group import consumer_group

TOPIC, GROUP, CONSUMER_GROUP, SHARE_GROUP = "orders", "billing", "shipping", "dispatch"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.text, self.children = tag, attrs, "", []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find(self, cls: str, **attrs: str) -> list[Element]:
        """Descendants with the class `cls` and the given attributes (data_topic= for data-topic)."""
        wanted = {key.replace("_", "-"): value for key, value in attrs.items()}
        found = []
        for child in self.children:
            if cls in child.classes and all(child.attrs.get(k) == v for k, v in wanted.items()):
                found.append(child)
            found.extend(child.find(cls, **attrs))
        return found


class Dom(HTMLParser):
    """The rendered DOM as a tree of elements with their text (scripts and styles left out)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.root = Element("document", {})
        self.stack = [self.root]
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {key: value or "" for key, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack[-1].tag not in ("script", "style"):
            for element in self.stack:
                element.text += data


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def busy_broker(broker: Any) -> None:
    """Three partitions of 10 records; a restart (the returning leader's epoch 1, KIP-101); 5 more records to
    partition 0; a group that committed 8 on every partition."""
    broker.create_topic(TOPIC, 3)

    def produce(count: int, partitions: range) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for p in partitions:
            for i in range(count):
                producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0

    produce(10, range(3))
    broker.restart()
    produce(5, range(1))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, 8) for p in range(3)], asynchronous=False)
    consumer.close()


def test_the_status_page_shows_partitions_leaders_and_epoch_history_in_headless_chromium(tmp_path: Path) -> None:
    with testing.broker(config={"metrics.listener": "http://127.0.0.1:0"}) as broker:
        busy_broker(broker)
        page = f"{broker.metrics_url}/"
        with consumer_group(broker.bootstrap_servers, CONSUMER_GROUP, TOPIC, 3, members=2) as members:
            testing.wait_until(lambda: all(g["state"] == "Stable" for g in get_json(f"{broker.metrics_url}/api/status")
                                           ["groups"] if g["group_id"] == CONSUMER_GROUP), "the consumer group Stable")
            owned = sorted(sorted(member.owns()) for member in members)
            # virtual time lets the page's fetch of api/status answer and render before the DOM is dumped
            dumped = chromium(tmp_path / "profile", "--virtual-time-budget=5000", "--window-size=1280,900",
                              "--dump-dom", page)
            assert dumped.returncode == 0, dumped.stderr[-2000:]
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / "status-page.png"
            shot.unlink(missing_ok=True)
            shown = chromium(tmp_path / "profile", "--virtual-time-budget=5000", "--window-size=1280,900",
                             f"--screenshot={shot}", page)
            assert shown.returncode == 0 and shot.is_file(), shown.stderr[-2000:]

    dom = Dom(dumped.stdout).root
    body = next(e for e in dom.children[0].children if e.tag == "body") if dom.children[0].tag == "html" else dom
    assert body.attrs.get("data-loaded") == "true", dumped.stdout[-3000:]
    rows = {int(row.attrs["data-partition"]): row for row in dom.find("partition", data_topic=TOPIC)}
    assert sorted(rows) == [0, 1, 2]
    for index, row in rows.items():
        assert (row.attrs["data-leader"], row.attrs["data-leader-epoch"]) == ("0", "1")
        (history,) = row.find("epoch-text")
        assert history.text.split() == ["e0@0", "e1@10"]  # the restart's epoch 1 began at offset 10
        segments = [seg for seg in row.find("epoch-seg") if "data-epoch" in seg.attrs]
        assert [seg.attrs["data-epoch"] for seg in segments] == ["0", "1"]
        # partition 0 wrote 5 records in epoch 1; on the others it has written none yet: a thin marker
        assert ("empty" in segments[1].classes) == (index != 0)
    assert dom.find("broker", data_broker="0")
    assert dom.find("offset-row", data_group=GROUP, data_topic=TOPIC, data_partition="0")
    (classic,) = dom.find("group-row", data_group=GROUP)
    assert classic.attrs["data-type"] == "classic"
    (consumer,) = dom.find("group-row", data_group=CONSUMER_GROUP)
    # two joins: group epoch 2, its target assignment computed for it
    assert (consumer.attrs["data-type"], consumer.attrs["data-group-epoch"], consumer.attrs["data-assignment-epoch"]
            ) == ("consumer", "2", "2")
    rows = dom.find("member-row", data_group=CONSUMER_GROUP)
    assert [(row.attrs["data-state"], row.attrs["data-member-epoch"]) for row in rows] == [("stable", "2")] * 2
    shown_owned = sorted(sorted(int(p) for tp in row.find("tp", data_topic=TOPIC) for p in tp.attrs["data-partitions"]
                                .split(",")) for row in rows)
    assert shown_owned == owned  # by topic name, as the members themselves were told
    assert not any(row.find("pending-list") or row.find("awaiting-list") for row in rows)

    colours = {colour for _, colour in Image.open(shot).convert("RGB").getcolors(1 << 20) or []}
    assert len(colours) > 20, "the screenshot is blank"


def dump_dom(profile: Path, page: str) -> Element:
    """The page's DOM once it has fetched api/status and rendered (virtual time lets that happen before the dump)."""
    dumped = chromium(profile, "--virtual-time-budget=5000", "--window-size=1280,900", "--dump-dom", page)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    return Dom(dumped.stdout).root


def share_partition_cells(row: Element) -> list[str]:
    return [row.find(cell)[0].text for cell in ("start-offset", "end-offset", "in-flight", "acquired", "archived")]


def test_a_share_consumer_holding_records_shows_its_share_partitions_offsets_and_in_flight_records(
        tmp_path: Path) -> None:
    # a lock as long as a broker allows: the held records stay acquired while Chromium loads the page
    config = {"metrics.listener": "http://127.0.0.1:0", "group.share.record.lock.duration.ms": "60000"}
    with testing.broker(config=config) as broker:
        broker.create_topic(TOPIC)
        resource = ConfigResource(ResourceType.GROUP, SHARE_GROUP, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept: the result needs its handle
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 100})
        for i in range(10):
            producer.produce(TOPIC, f"job-{i}".encode(), partition=0)
        assert producer.flush(30) == 0  # one log batch of offsets 0-9, acquired whole
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": SHARE_GROUP,
                                  "share.acknowledgement.mode": "explicit"})
        try:
            consumer.subscribe([TOPIC])
            held = testing.wait_until(lambda: consumer.poll(0.5), "the share consumer to acquire the batch")
            assert [m.offset() for m in held] == list(range(10)), [m.error() for m in held]
            for message in held[:4]:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)  # SPSO moves past them
            for message in held[4:6]:
                consumer.acknowledge(message, AcknowledgeType.RELEASE)  # in flight again, no longer acquired
            consumer.commit_sync(30)  # the other four stay acquired: the consumer is not polled again
            expected = {"group_id": SHARE_GROUP, "topic": TOPIC, "partition": 0, "start_offset": 4, "end_offset": 10,
                        "in_flight": 6, "acquired": 4, "archived": 0}
            testing.wait_until(lambda: get_json(f"{broker.metrics_url}/api/status")["share_partitions"] == [expected],
                               "the acknowledgements in the share-partition")
            dom = dump_dom(tmp_path / "profile", f"{broker.metrics_url}/")
            status = get_json(f"{broker.metrics_url}/api/status")
        finally:
            consumer.close()

    assert status["share_partitions"] == [expected]  # still held when the page was drawn
    (row,) = dom.find("share-partition", data_group=SHARE_GROUP, data_topic=TOPIC, data_partition="0")
    assert share_partition_cells(row) == ["4", "10", "6", "4", "0"]
    (group,) = [g for g in status["groups"] if g["group_id"] == SHARE_GROUP]
    (group_row,) = dom.find("group-row", data_group=SHARE_GROUP)
    assert (group_row.attrs["data-type"], group_row.attrs["data-group-epoch"], group_row.attrs["data-assignment-epoch"]
            ) == ("share", str(group["group_epoch"]), str(group["assignment_epoch"]))
    assert group_row.find("share-count")[0].text == "1 share-partition · 6 in flight"
    (member,) = group["member_details"]
    (member_row,) = dom.find("member-row", data_group=SHARE_GROUP)
    assert (member_row.attrs["data-member"], member_row.attrs["data-member-epoch"], member_row.attrs["data-state"]
            ) == (member["member_id"], str(member["member_epoch"]), "stable")
    assert [tp.attrs["data-partitions"] for tp in member_row.find("tp", data_topic=TOPIC)] == ["0"]


def test_the_page_draws_offline_partitions_fenced_brokers_empty_epochs_and_faults(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    shutil.copy(PAGE, site / "index.html")
    shutil.copy(Path(__file__).with_name("status_sample.json"), site / "api" / "status")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        dumped = chromium(tmp_path / "profile", "--virtual-time-budget=5000", "--window-size=1280,900",
                          "--dump-dom", f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        serving.join()
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom(dumped.stdout).root
    assert [b.attrs["data-broker"] for b in dom.find("broker", data_fenced="true")] == ["3"]
    (offline,) = dom.find("partition", data_topic=TOPIC, data_partition="2")
    assert "offline" in offline.classes and not offline.find("epoch-band")
    (reelected,) = dom.find("partition", data_topic=TOPIC, data_partition="1")
    assert reelected.find("epoch-text")[0].text.split() == ["e0@0", "e1@250", "e4@900", "e6@1500"]
    (newest,) = reelected.find("epoch-seg", data_epoch="6")
    assert "empty" in newest.classes  # a new leader's epoch that has written nothing yet is still drawn
    assert [f.attrs["data-key"] for f in dom.find("fault")] == ["fault.replication.paused"]
    (consumer,) = dom.find("group-row", data_group="shipping")
    assert (consumer.attrs["data-type"], consumer.attrs["data-group-epoch"]) == ("consumer", "7")
    revoking, waiting = dom.find("member-row", data_group="shipping")
    assert (revoking.attrs["data-state"], revoking.attrs["data-member-epoch"]) == ("unrevoked", "6")
    (pending,) = revoking.find("pending-list")
    assert [tp.attrs["data-partitions"] for tp in pending.find("tp", data_topic=TOPIC)] == ["1"]
    assert (waiting.attrs["data-state"], waiting.attrs["data-member-epoch"]) == ("unreleased", "7")
    assert "regex orders.*" in waiting.text and not waiting.find("pending-list")
    (awaiting,) = waiting.find("awaiting-list")  # its target's partition 1, still held by the revoking member
    assert [tp.attrs["data-partitions"] for tp in awaiting.find("tp", data_topic=TOPIC)] == ["1"]
    (client,) = dom.find("client", data_client_id="rdkafka")  # KIP-714: a client instance pushing telemetry
    assert (client.attrs["data-instance"], client.attrs["data-metrics"]) == ("x3bV0Zq1T8e8oYkqj4cL2w", "31")
    (share,) = dom.find("group-row", data_group=SHARE_GROUP)
    assert (share.attrs["data-type"], share.attrs["data-group-epoch"]) == ("share", "4")
    assert share.find("share-count")[0].text == "2 share-partitions · 50 in flight"
    members = dom.find("member-row", data_group=SHARE_GROUP)  # two of the three share partition 0
    assert [(m.attrs["data-member-epoch"], [tp.attrs["data-partitions"] for tp in m.find("tp", data_topic=TOPIC)])
            for m in members] == [("4", ["0"]), ("4", ["1"]), ("3", ["0"])]
    rows = dom.find("share-partition", data_group=SHARE_GROUP, data_topic=TOPIC)
    assert [(r.attrs["data-partition"], share_partition_cells(r)) for r in rows] == [
        ("0", ["1150", "1200", "50", "20", "4"]), ("1", ["1430", "1430", "0", "0", "0"])]
    internal = [t for t in dom.find("topic") if t.attrs.get("data-internal") == "true"]
    assert [t.attrs["data-topic"] for t in internal] == ["__consumer_offsets"] and "open" not in internal[0].attrs

"""report.html renders in a real browser: headless Chromium (Debian's `chromium`) loads a report made from a
synthetic history and takes a screenshot, kept under build/test-artifacts/; the timeline's leader bands, fault
shading and invariants table are on it."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from epoch_broker.drill import report
from epoch_broker.drill.checker import check_directory
from epoch_broker.drill.history import HistoryWriter
from tests.helpers import ARTIFACTS, chromium


def synthetic_drill(directory: Path) -> None:
    """A partition led by broker 0 in epoch 0, a leader-kill, then broker 1 in epoch 1; 40 records acked."""
    with (HistoryWriter(directory, "producer") as producer, HistoryWriter(directory, "poller") as poller,
          HistoryWriter(directory, "nemesis") as nemesis, HistoryWriter(directory, "reader") as reader):
        for n in range(40):
            if n == 10:
                poller.record("metadata", broker=0, topic="drill", partition=0, leader=0, leader_epoch=0)
            if n == 20:
                nemesis.record("fault", fault="leader-kill", target="broker-0", phase="start", detail="SIGKILL")
            if n == 25:
                poller.record("metadata", broker=1, topic="drill", partition=0, leader=1, leader_epoch=1)
                nemesis.record("fault", fault="leader-kill", target="broker-0", phase="end", detail="healed")
            producer.record("send", topic="drill", partition=0, value=f"p0-{n}", acks="all")
            producer.record("ack", topic="drill", partition=0, value=f"p0-{n}", offset=n, error=None, acks="all")
            reader.record("read", topic="drill", partition=0, offset=n, value=f"p0-{n}",
                          leader_epoch=0 if n < 25 else 1)
        poller.record("metadata", broker=1, topic="drill", partition=0, leader=1, leader_epoch=1)


def test_the_report_renders_in_headless_chromium_with_its_timeline(tmp_path: Path) -> None:
    synthetic_drill(tmp_path / "history")
    result = check_directory(tmp_path / "history")
    assert result.passed
    page = tmp_path / "report.html"
    page.write_text(report.render({"scenario": "leader-kill", "seed": 7, "duration_s": 12.0, "wall_s": 20.0,
                                   "timings": {"faults": 12.0}, "check": result.to_json(),
                                   "schedule": [{"at_s": 2.0, "fault": "leader-kill", "target": "leader:0",
                                                 "duration_s": 1.5}]}, tmp_path / "history"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "drill-report.png"
    shot.unlink(missing_ok=True)
    run = chromium(tmp_path / "profile", "--window-size=1100,1800", f"--screenshot={shot}", page.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    colours = Image.open(shot).convert("RGB").getcolors(1 << 20) or []
    seen = {colour for _, colour in colours}
    assert (0x4E, 0x79, 0xA7) in seen  # broker 0's leader band
    assert (0xF2, 0x8E, 0x2B) in seen  # broker 1's leader band, after the epoch change
    assert (0xE3, 0xF4, 0xE1) in seen  # the invariants table's pass rows
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert dom.count("class=\"leader\"") == 2 and "leader-kill broker-0" in dom


def test_the_report_shows_the_group_protocol_and_who_held_each_partition(tmp_path: Path) -> None:
    history = tmp_path / "history"
    synthetic_drill(history)
    with HistoryWriter(history, "member-0") as first, HistoryWriter(history, "member-1") as second:
        for member in (first, second):
            member.record("member", group="g", phase="start", instance=None, protocol="consumer")
        first.record("assigned", topic="drill", partitions=[0])
        for n in range(40):  # the group read everything
            first.record("read", topic="drill", partition=0, offset=n, value=f"p0-{n}", leader_epoch=0 if n < 25 else 1)
        first.record("revoked", topic="drill", partitions=[0], how="revoke")
        second.record("assigned", topic="drill", partitions=[0])
    result = check_directory(history)
    assert result.passed
    document = {"scenario": "consumer-group-churn", "seed": 1, "duration_s": 12.0, "wall_s": 20.0, "timings": {},
                "check": result.to_json(), "schedule": [], "group_protocol": "consumer", "group_members": 2}
    page = report.render(document, history)
    assert "consumer group of 2 members at the start, group protocol consumer" in page
    assert page.count("class='held'") == 2 and "member-0 holds drill-0 from " in page
    assert " s to on_revoke at " in page and "member-1 holds drill-0 from" in page and "to the end" in page
    assert "no consumer group" in report.render({**document, "group_members": 0, "group_protocol": "classic"}, history)

"""broker/events.py: the cluster's timeline lines are parseable back into what was emitted, wherever they sit in
a log line, with wall-clock times every process agrees on."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from epoch_broker.broker import events


def test_an_event_line_parses_back_with_quoted_values_and_lists() -> None:
    at = datetime(2026, 11, 24, 14, 39, 12, 345000, tzinfo=UTC)
    events.set_node(1000)
    line = events.format_event("fence", {"broker": 2, "why": 'no heartbeat for 1500 ms (a="b")'}, at)
    assert line == ('EVENT ts=2026-11-24T14:39:12.345Z node=1000 kind=fence broker=2 '
                    'why="no heartbeat for 1500 ms (a=\\"b\\")"')
    parsed = events.parse(f"2026-11-24 14:39:12,346 INFO epoch_broker.events: {line}")
    assert parsed == {"node": "1000", "kind": "fence", "broker": "2", "why": 'no heartbeat for 1500 ms (a="b")',
                      "time": at.timestamp()}
    assert events.parse(events.format_event("isr", {"isr": (1, 2), "why": ""}, at))["isr"] == "1,2"
    assert events.parse("2026 INFO something else entirely") is None


def test_emit_logs_through_the_events_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="epoch_broker.events"):
        events.emit("truncate", topic="t", partition=0, to=3)
    (record,) = caplog.records
    assert events.parse(record.getMessage())["to"] == "3"

"""The cluster's own timeline: one parseable log line per event that changes who leads or what is replicated.

    EVENT ts=2026-11-24T14:39:12.345Z node=1000 kind=leader topic=drill partition=0 leader=1 epoch=3 isr=1,2 why="..."

- `ts` is wall-clock UTC with milliseconds (every process of a cluster, on one machine or not, can be merged by
  it), `node` the node id of the process that logged it, `kind` one of KINDS; then the event's own fields.
- Values are written bare when they hold no space, quote or `=`, else as a JSON string.

Kinds: `leader` (the controller elected a leader: topic, partition, leader, epoch, isr, why), `isr` (an ISR
change without a new leader), `fence` and `unfence` (the controller, of broker `broker`, with why: a session
that expired or a heartbeat connection that closed, with the real delays), `truncate` (a replica cut its log:
topic, partition, from, to, epoch), `fault` (a fault hook set or cleared on this broker: key, value),
`controller` (a controller process became the active one: controller_epoch) and `resign` (it stopped acting:
controller_epoch, why).

Rules:
- The lines go through the `epoch_broker.events` logger at INFO: they land in each process's log with the rest,
  and `parse` finds them there (drill/runner.py merges every process's into the drill's report), in a JSON log
  line (`log.format=json`) too.
- Emitting never fails the caller: a field is rendered with str().
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

KINDS = ("leader", "isr", "fence", "unfence", "truncate", "fault", "controller", "resign")
MARKER = "EVENT "
log = logging.getLogger("epoch_broker.events")
_node_id = -1
_NEEDS_QUOTES = re.compile(r'[\s"=]')
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def set_node(node_id: int) -> None:
    """The node id this process logs its events as."""
    global _node_id
    _node_id = node_id


def emit(kind: str, **fields: Any) -> None:
    log.info("%s", format_event(kind, fields))


def format_event(kind: str, fields: dict[str, Any], at: datetime | None = None) -> str:
    stamp = (at or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    parts = [f"ts={stamp}", f"node={_node_id}", f"kind={kind}"]
    for key, value in fields.items():
        text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        parts.append(f"{key}={text if text and not _NEEDS_QUOTES.search(text) else json.dumps(text)}")
    return MARKER + " ".join(parts)


def parse(line: str) -> dict[str, Any] | None:
    """The event in a log line (fields as strings, `time` as Unix seconds), or None if it holds none. A JSON log
    line (`log.format=json`, epoch_broker/logs.py) is decoded first: the event is its `msg`."""
    if line.lstrip().startswith("{"):
        try:
            decoded = json.loads(line)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("msg"), str):
            line = decoded["msg"]
    start = line.find(MARKER)
    if start < 0:
        return None
    fields = {key: json.loads(value) if value.startswith('"') else value
              for key, value in _PAIR.findall(line[start + len(MARKER):])}
    if "ts" not in fields or "kind" not in fields:
        return None
    fields["time"] = datetime.fromisoformat(fields.pop("ts").replace("Z", "+00:00")).timestamp()
    return fields

"""report.html of a drill: one self-contained page (inline SVG and CSS, nothing fetched), readable at a glance.

- The verdict and the invariants table (pass/fail, counts, what each checks), then the figures.
- One timeline per partition: the leader as coloured bands (one colour per broker) labelled with the leader
  epoch, as the brokers' Metadata said it over time; faults shaded with their name and target; acknowledged
  records per second as bars; truncations the consumer reported marked in red.
- Where the drill ran a consumer group: the consumers' group protocol, and one row per partition showing which
  member held it over time (from its on_assign to its on_revoke, on_lost or end), a colour per member.
- Where the drill ran a Spark pipeline (spark-pipeline): its input records and output rows, and its driver's life
  (each start, its query running, each SIGKILL or exit, the clean stop) with times.
- The anomalies with their example records, the schedule, and the cluster's own timeline: every leader, ISR,
  fencing, truncation and fault event its nodes logged (broker/events.py), merged by time; on the partition
  timelines, leader changes are ticks above the band and truncations dashed red lines.

Rules:
- Everything comes from report.json's content and the history: the page can be made again from a copied report.
- Times are seconds since the first event of the history.
"""

from __future__ import annotations

import html
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from epoch_broker.drill.checker import holdings
from epoch_broker.drill.history import Event, read_history

WIDTH, BAND_H, RATE_H, MARGIN, HOLDER_H = 960, 26, 60, 40, 18
COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"]
STYLE = """body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}.pass{background:#e3f4e1}.fail{background:#fbe0e0}
h1 .pass,h1 .fail{padding:2px 10px;border-radius:4px}svg{display:block;margin:4px 0 18px}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;color:#fff;border-radius:3px}
pre{background:#f6f6f6;padding:8px;overflow-x:auto}"""


def render(document: dict[str, Any], history_dir: Path) -> str:
    events = read_history(history_dir)
    check = document["check"]
    verdict = "pass" if check["passed"] else "fail"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>drill {_e(document['scenario'])}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>{_e(document['scenario'])} <span class='{verdict}'>{verdict.upper()}</span></h1>",
             f"<p>against {_e(document.get('target', 'a cluster'))}; {_group(document)}</p>",
             f"<p>seed {document['seed']}, {document['duration_s']:.0f} s of faults, {document['wall_s']:.0f} s "
             f"in all; phases: {_e(', '.join(f'{k} {v:.1f} s' for k, v in document['timings'].items()))}</p>",
             _failovers(document.get("failover_s", [])), _invariants(check), _figures(check["figures"]),
             "<h2>Timeline</h2>",
             _timelines(events, document.get("cluster_events", [])), _holders(events),
             _pipeline(events, check["figures"]),
             _anomalies(check), _schedule(document["schedule"]),
             _cluster_events(document.get("cluster_events", []), events[0]["time"] if events else 0.0),
             "</body></html>"]
    return "\n".join(parts)


def _e(text: object) -> str:
    return html.escape(str(text))


def _group(document: dict[str, Any]) -> str:
    protocol = _e(document.get("group_protocol", "classic"))
    members = document.get("group_members", 0)
    if not members:
        return f"consumers' group protocol {protocol} (no consumer group)"
    return f"consumer group of {members} members at the start, group protocol {protocol}"


def _holders(events: list[Event]) -> str:
    """Which member held each partition over time: a row per (group, partition), a band per holding."""
    held = holdings(events)
    if not held:
        return ""
    origin, end = events[0]["time"], events[-1]["time"]
    span = max(end - origin, 1e-3)

    def x(t: float) -> float:
        return MARGIN + (min(t, end) - origin) / span * (WIDTH - 2 * MARGIN)

    members = sorted({h.client for spans in held.values() for h in spans})
    colour = {member: COLOURS[i % len(COLOURS)] for i, member in enumerate(members)}
    legend = "".join(f"<span style='background:{colour[m]}'>{_e(m)}</span>" for m in members)
    rows = sorted(held.items(), key=lambda item: (str(item[0][0]), item[0][1]))
    out = [f"<h2>Consumer group</h2><div class='legend'>{legend}</div>",
           f"<svg id='holders' width='{WIDTH}' height='{len(rows) * HOLDER_H + 16}' "
           "xmlns='http://www.w3.org/2000/svg'>"]
    for row, ((_, (topic, partition)), spans) in enumerate(rows):
        y = row * HOLDER_H
        out.append(f"<text x='2' y='{y + HOLDER_H - 6}' font-size='10' fill='#555'>{_e(topic)}-{partition}</text>")
        for h in spans:
            stop = h.end["time"] if h.end is not None else end
            how = ("to the end" if h.end is None else
                   f"to {'its end' if h.end['op'] == 'member' else 'on_' + h.end['how']} at {stop - origin:.3f} s")
            out.append(f"<rect class='held' x='{x(h.start['time']):.1f}' y='{y + 2}' "
                       f"width='{max(x(stop) - x(h.start['time']), 1):.1f}' height='{HOLDER_H - 4}' "
                       f"fill='{colour[h.client]}' opacity='0.8'><title>{_e(h.client)} holds {_e(topic)}-"
                       f"{partition} from {h.start['time'] - origin:.3f} s {_e(how)}</title></rect>")
    out.append("</svg>")
    return "".join(out)


def _pipeline(events: list[Event], figures: dict[str, Any]) -> str:
    """The Spark pipeline's rows in and out, and a row per event of its driver's life."""
    life = [e for e in events if e["op"] == "driver"]
    if not life and "pipeline_output" not in figures:
        return ""
    origin = events[0]["time"]
    rows = "".join(f"<tr><td>{e['time'] - origin:.3f}</td><td>{_e(e['phase'])}</td><td>{e['pid']}</td>"
                   f"<td>{_e(e.get('status', ''))}</td><td>{_e(e.get('detail') or '')}</td></tr>" for e in life)
    return (f"<h2>Spark pipeline</h2><p id='pipeline'>{figures.get('pipeline_input', 0)} input records (the input's "
            f"final read_committed log), {figures.get('pipeline_output', 0)} output rows read read_committed, "
            f"{figures.get('driver_starts', 0)} driver starts</p><table><tr><th>s</th><th>driver</th><th>pid</th>"
            f"<th>status</th><th>detail</th></tr>{rows}</table>")


def _failovers(times: list[float]) -> str:
    if not times:
        return ""
    return (f"<p id='failover'>failover seen by the producer (leader SIGKILL to its first acknowledged record sent "
            f"after it): median {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s "
            f"over {len(times)} kills</p>")


def _invariants(check: dict[str, Any]) -> str:
    rows = "".join(f"<tr class='{'pass' if i['passed'] else 'fail'}'><td>{_e(i['name'])}</td>"
                   f"<td>{'pass' if i['passed'] else 'FAIL'}</td><td>{i['count']}</td><td>{_e(i['note'])}</td></tr>"
                   for i in check["invariants"])
    return f"<h2>Invariants</h2><table id='invariants'><tr><th>invariant</th><th></th><th>count</th>" \
           f"<th>what it checks</th></tr>{rows}</table>"


def _figures(figures: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in figures.items())
    return f"<h2>Figures</h2><table>{rows}</table>"


def _anomalies(check: dict[str, Any]) -> str:
    failing = [i for i in check["invariants"] if not i["passed"]]
    if not failing:
        return "<h2>Anomalies</h2><p>none</p>"
    return "<h2>Anomalies</h2>" + "".join(
        f"<h3>{_e(i['name'])} ({i['count']})</h3><pre>{_e(chr(10).join(i['examples']))}</pre>" for i in failing)


def _schedule(schedule: list[dict[str, Any]]) -> str:
    rows = "".join(f"<tr><td>{f['at_s']:.2f}</td><td>{_e(f['fault'])}</td><td>{_e(f['target'])}</td>"
                   f"<td>{f['duration_s']:.2f}</td></tr>" for f in schedule)
    return f"<h2>Schedule</h2><table><tr><th>at s</th><th>fault</th><th>target</th><th>for s</th></tr>{rows}</table>"


def _cluster_events(cluster_events: list[dict[str, Any]], origin: float) -> str:
    if not cluster_events:
        return "<h2>Cluster timeline</h2><p>no events in the nodes' logs</p>"
    skip = ("time", "node", "kind")
    rows = "".join(f"<tr><td>{e['time'] - origin:.3f}</td><td>{_e(e['node'])}</td><td>{_e(e['kind'])}</td>"
                   f"<td>{_e(' '.join(f'{k}={v}' for k, v in e.items() if k not in skip))}</td></tr>"
                   for e in cluster_events)
    return (f"<h2>Cluster timeline</h2><table id='cluster-events'><tr><th>s</th><th>node</th><th>kind</th>"
            f"<th>what</th></tr>{rows}</table>")


def _timelines(events: list[Event], cluster_events: list[dict[str, Any]]) -> str:
    if not events:
        return "<p>no events</p>"
    origin, end = events[0]["time"], events[-1]["time"]
    span = max(end - origin, 1e-3)

    def x(t: float) -> float:
        return MARGIN + (t - origin) / span * (WIDTH - 2 * MARGIN)

    faults = _fault_spans(events, end)
    partitions = sorted({(e["topic"], e["partition"]) for e in events if e["op"] in ("metadata", "ack")})
    leaders = sorted({e["leader"] for e in events if e["op"] == "metadata" and e["leader"] >= 0})
    legend = "".join(f"<span style='background:{COLOURS[n % len(COLOURS)]}'>leader broker {n}</span>"
                     for n in leaders)
    svgs = [f"<div class='legend'>{legend}<span style='background:#999'>fault</span>"
            "<span style='background:#d62728'>truncation reported</span></div>"]
    for topic, partition in partitions:
        own = [e for e in cluster_events if (e.get("topic"), e.get("partition")) == (topic, str(partition))]
        svgs.append(_partition_svg(topic, partition, events, faults, own, x, origin, span))
    return "\n".join(svgs)


def _fault_spans(events: list[Event], end: float) -> list[tuple[float, float, str]]:
    open_at: dict[tuple[str, str], float] = {}
    spans = []
    for event in (e for e in events if e["op"] == "fault"):
        key = (event["fault"], event["target"])
        if event["phase"] == "start":
            open_at[key] = event["time"]
        elif key in open_at:
            spans.append((open_at.pop(key), event["time"], f"{event['fault']} {event['target']}"))
    spans += [(start, end, f"{fault} {target}") for (fault, target), start in open_at.items()]
    return spans


def _partition_svg(topic: str, partition: int, events: list[Event], faults: list[tuple[float, float, str]],
                   cluster_events: list[dict[str, Any]], x: Any, origin: float, span: float) -> str:
    height = BAND_H + RATE_H + 30
    out = [f"<h3>{_e(topic)}-{partition}</h3><svg width='{WIDTH}' height='{height}' "
           f"data-partition='{partition}' xmlns='http://www.w3.org/2000/svg'>"]
    for start, stop, label in faults:
        out.append(f"<rect class='fault' x='{x(start):.1f}' y='0' width='{max(x(stop) - x(start), 1):.1f}' "
                   f"height='{height - 14}' fill='#999' opacity='0.25'><title>{_e(label)}</title></rect>"
                   f"<text x='{x(start) + 2:.1f}' y='{BAND_H + 11}' font-size='9' fill='#333'>{_e(label)}</text>")
    # the leader as the newest epoch any broker reported, in bands
    newest = (-1, -1)
    bands: list[list[Any]] = []  # [start, end, leader, epoch]
    for event in events:
        if event["op"] != "metadata" or (event["topic"], event["partition"]) != (topic, partition):
            continue
        state = (event["leader_epoch"], event["leader"])
        if state[0] < newest[0]:
            continue
        if bands and (bands[-1][3], bands[-1][2]) == state:
            bands[-1][1] = event["time"]
        else:
            if bands:
                bands[-1][1] = event["time"]
            bands.append([event["time"], event["time"], state[1], state[0]])
        newest = state
    for start, stop, leader, epoch in bands:
        colour = COLOURS[leader % len(COLOURS)] if leader >= 0 else "#ddd"
        width = max(x(stop) - x(start), 1)
        out.append(f"<rect class='leader' x='{x(start):.1f}' y='0' width='{width:.1f}' height='{BAND_H}' "
                   f"fill='{colour}'><title>leader {leader}, epoch {epoch}</title></rect>")
        if width > 28:
            out.append(f"<text x='{x(start) + 3:.1f}' y='{BAND_H - 8}' fill='#fff' font-size='11'>e{epoch}</text>")
    # acknowledged records per second, as bars under the band
    per_second: dict[int, int] = defaultdict(int)
    for event in events:
        if (event["op"] == "ack" and event.get("error") is None
                and (event["topic"], event["partition"]) == (topic, partition)):
            per_second[int(event["time"] - origin)] += 1
    top = max(per_second.values(), default=1)
    for second, count in per_second.items():
        bar = count / top * (RATE_H - 4)
        out.append(f"<rect x='{x(origin + second):.1f}' y='{BAND_H + RATE_H - bar + 4:.1f}' "
                   f"width='{max(min(x(origin + second + 1), WIDTH - MARGIN) - x(origin + second) - 1, 1):.1f}' "
                   f"height='{bar:.1f}' "
                   f"fill='#59a14f'><title>{count} acked in second {second}</title></rect>")
    for event in events:
        if event["op"] == "truncation" and (event["topic"], event["partition"]) == (topic, partition):
            out.append(f"<line x1='{x(event['time']):.1f}' x2='{x(event['time']):.1f}' y1='0' "
                       f"y2='{BAND_H + RATE_H}' stroke='#d62728' stroke-width='2'><title>truncation reported at "
                       f"offset {event['offset']}</title></line>")
    for event in cluster_events:
        at = x(min(max(event["time"], origin), origin + span))
        if event["kind"] == "leader":
            out.append(f"<line class='election' x1='{at:.1f}' x2='{at:.1f}' y1='0' y2='{BAND_H}' stroke='#000' "
                       f"stroke-width='2'><title>leader {_e(event['leader'])} in epoch {_e(event['epoch'])}, ISR "
                       f"{_e(event['isr'])}: {_e(event.get('why', ''))}</title></line>")
        elif event["kind"] == "truncate":
            out.append(f"<line class='truncate' x1='{at:.1f}' x2='{at:.1f}' y1='0' y2='{BAND_H + RATE_H}' "
                       f"stroke='#d62728' stroke-dasharray='4 3'><title>node {_e(event['node'])} truncated from "
                       f"{_e(event['from'])} to {_e(event['to'])}</title></line>")
    for tick in range(0, int(span) + 1, max(1, int(span) // 10 or 1)):
        out.append(f"<text x='{x(origin + tick):.1f}' y='{height - 2}' font-size='10' fill='#555'>{tick}s</text>")
    out.append(f"<text x='2' y='{BAND_H + 16}' font-size='10' fill='#555'>acks/s</text>")
    out.append(f"<text x='2' y='{BAND_H + 28}' font-size='10' fill='#555'>max {top}</text></svg>")
    return "".join(out)

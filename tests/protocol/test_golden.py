"""Golden bytes: request frames captured from five real clients decode as expected and re-encode exactly.

The frames in golden/requests/ were captured with golden/capture.py in front of the Tansu broker (recipe in
golden/README.md); index.json names each file's client, API and version. Each frame is a request header
followed by the body. The test decodes both, spot-checks the fields that matter (client id, topic, acks,
leader epochs, offsets, record batch magic) and encodes header and body back to the very same bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.protocol.headers import REQUEST_HEADER, encode_request_header
from epoch_broker.protocol.messages import APIS

GOLDEN = Path(__file__).parent / "golden" / "requests"
INDEX: list[dict[str, Any]] = json.loads((GOLDEN / "index.json").read_text())
NO_ID = bytes(16)

# file -> {dotted path into the decoded body: expected value}
EXPECTED: dict[str, dict[str, Any]] = {
    # ApiVersions: v3+ bodies name the client library; v0-2 bodies are empty.
    "confluent-18-v3-1.bin": {"client_software_name": "confluent-kafka-python",
                              "client_software_version": "2.16.1-rdkafka-2.16.0"},
    "kafka-python-18-v4-1.bin": {"client_software_name": "kafka-python", "client_software_version": "3.0.12"},
    "aiokafka-18-v0-1.bin": {},
    "kcat-18-v3-1.bin": {"client_software_name": "librdkafka", "client_software_version": "2.0.2"},
    "kafkajs-18-v2-1.bin": {},
    # Metadata: producers ask for their topic with auto-creation on (kafka-python and aiokafka ask for none).
    "confluent-3-v12-1.bin": {"topics.0.name": "golden-confluent", "topics.0.topic_id": NO_ID,
                              "allow_auto_topic_creation": True},
    "kafka-python-3-v12-1.bin": {"topics": [], "allow_auto_topic_creation": True},
    "aiokafka-3-v5-1.bin": {"topics": [], "allow_auto_topic_creation": True},
    "kcat-3-v4-1.bin": {"topics.0.name": "golden-kcat", "allow_auto_topic_creation": True},
    "kafkajs-3-v6-1.bin": {"topics.0.name": "golden-kafkajs", "allow_auto_topic_creation": True},
    # Produce: acks=all to partition 0; no client writes our tagged current_leader_epoch.
    "confluent-0-v10-1.bin": {"acks": -1, "timeout_ms": 30000, "transactional_id": None,
                              "topic_data.0.name": "golden-confluent", "topic_data.0.partition_data.0.index": 0,
                              "topic_data.0.partition_data.0.current_leader_epoch": -1},
    "kafka-python-0-v9-1.bin": {"acks": -1, "topic_data.0.name": "golden-kafka-python",
                                "topic_data.0.partition_data.0.current_leader_epoch": -1},
    "aiokafka-0-v7-1.bin": {"acks": -1, "timeout_ms": 40000, "topic_data.0.name": "golden-aiokafka"},
    "kcat-0-v7-1.bin": {"acks": -1, "topic_data.0.name": "golden-kcat"},
    "kafkajs-0-v7-1.bin": {"acks": -1, "topic_data.0.name": "golden-kafkajs"},
    # ListOffsets: earliest (-2) for a seek to the beginning; kafkajs' admin asks latest (-1) per partition.
    # librdkafka 2.16 sends current_leader_epoch 0 once Metadata v9+ makes epochs reliable (-1 elsewhere).
    "confluent-2-v7-1.bin": {"replica_id": -1, "isolation_level": 1, "topics.0.name": "golden-confluent",
                             "topics.0.partitions.0.timestamp": -2,
                             "topics.0.partitions.0.current_leader_epoch": 0},
    "kafka-python-2-v9-1.bin": {"topics.0.partitions.0.timestamp": -2,
                                "topics.0.partitions.0.current_leader_epoch": -1},
    "aiokafka-2-v3-1.bin": {"topics.0.name": "golden-aiokafka", "topics.0.partitions.0.timestamp": -2},
    "kcat-2-v2-1.bin": {"isolation_level": 1, "topics.0.partitions.0.timestamp": -2},
    "kafkajs-2-v3-1.bin": {"topics.0.name": "golden-kafkajs", "topics.0.partitions.3.partition_index": 3,
                           "topics.0.partitions.0.timestamp": -1},
    # Fetch: from offset 0; v13+ names topics by id only; KIP-320 epochs from the clients that use them.
    "confluent-1-v16-1.bin": {"topics.0.topic": "", "topics.0.partitions.0.current_leader_epoch": 0,
                              "topics.0.partitions.0.fetch_offset": 0,
                              "topics.0.partitions.0.last_fetched_epoch": -1, "replica_state.replica_id": -1},
    "kafka-python-1-v12-1.bin": {"topics.0.topic": "golden-kafka-python", "topics.0.topic_id": NO_ID,
                                 "topics.0.partitions.0.current_leader_epoch": 0,
                                 "topics.0.partitions.0.last_fetched_epoch": -1, "max_bytes": 52428800},
    "aiokafka-1-v11-1.bin": {"topics.0.topic": "golden-aiokafka",
                             "topics.0.partitions.0.current_leader_epoch": -1, "rack_id": ""},
    "kcat-1-v11-1.bin": {"topics.0.topic": "golden-kcat", "topics.0.partitions.0.current_leader_epoch": -1},
    "kafkajs-1-v11-1.bin": {"topics.0.topic": "golden-kafkajs", "max_wait_ms": 5000,
                            "topics.0.partitions.0.current_leader_epoch": -1},
}


def pick(obj: Any, path: str) -> Any:
    for step in path.split("."):
        obj = obj[int(step)] if step.isdigit() else getattr(obj, step)
    return obj


def test_index_covers_every_client_and_api_and_every_frame_has_expectations() -> None:
    clients = {entry["client"].split()[0] for entry in INDEX}
    assert clients == {"confluent-kafka", "kafka-python", "aiokafka", "kcat", "kafkajs"}
    for client in clients:
        assert {e["api"] for e in INDEX if e["client"].startswith(client)} == {
            "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"
        }
    assert {entry["file"] for entry in INDEX} == set(EXPECTED) == {path.name for path in GOLDEN.glob("*.bin")}


@pytest.mark.parametrize("entry", INDEX, ids=[entry["file"].removesuffix(".bin") for entry in INDEX])
def test_captured_request_decodes_to_expected_values_and_reencodes_identically(entry: dict[str, Any]) -> None:
    frame = (GOLDEN / entry["file"]).read_bytes()
    api, version = APIS[entry["api_key"]], entry["version"]
    header_version = api.request_header_version(version)
    header, start = REQUEST_HEADER.decode_from(frame, header_version)
    assert (header.request_api_key, header.request_api_version) == (entry["api_key"], version)
    assert header.client_id == "golden-" + entry["file"].rsplit("-", 3)[0]

    body, end = api.request.decode_from(frame, version, start)
    assert end == len(frame)
    for path, expected in EXPECTED[entry["file"]].items():
        assert pick(body, path) == expected, path
    if entry["api_key"] == 0:  # Produce carries one RecordBatch v2 whose length field covers the rest
        records = bytes(body.topic_data[0].partition_data[0].records)
        (batch_length,) = struct.unpack_from(">i", records, 8)
        assert (records[16], 12 + batch_length) == (2, len(records))
    if entry["api_key"] == 1 and version >= 13:
        assert body.topics[0].topic_id != NO_ID

    encoded_header = encode_request_header(entry["api_key"], version, header.correlation_id, header.client_id,
                                           header_version)
    assert encoded_header + api.request.encode(body, version) == frame

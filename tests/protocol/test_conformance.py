"""Spec conformance: every declared (API, version) matches Kafka's message JSON, field by field.

The reference is `../shared/kafka-protocol-spec/` beside the repository (Kafka 3.9 schemas), or the folder
named by the environment variable KAFKA_PROTOCOL_SPEC. The tests are skipped only if that folder is absent.
A version newer than 3.9's (Kafka 4.x, for `kafka.version` 4.0 on) is checked against the Kafka 4.x schemas
kafka-python vendors (its `kafka/protocol/schemas/resources`, Kafka's JSON with Kafka's licence), a dev
dependency.

For each message and each version it claims, the fields present at that version are compared with the
JSON's, recursively (inline and common structs): name (snake_case of the JSON name), type (verbatim),
version strings, nullability, tag and tagged versions, per-field flexible override and the default a
decoded object gets. The claimed range must lie within the JSON's validVersions and the flexible range must
be the JSON's. Fields that exist in no claimed version may be left out of a declaration; nothing else may
differ, except the deliberate extensions allow-listed in EXTENSIONS.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol import schemas as kafka_schemas

from epoch_broker.protocol.messages import APIS
from epoch_broker.protocol.schema import Field, Message, snake_case
from epoch_broker.protocol.versions import VersionRange

SPEC_DIR = Path(
    os.environ.get("KAFKA_PROTOCOL_SPEC", Path(__file__).resolve().parents[3] / "shared" / "kafka-protocol-spec")
)
NEWER_SPEC_DIR = Path(kafka_schemas.__file__).parent / "resources"
pytestmark = pytest.mark.skipif(not SPEC_DIR.is_dir(), reason=f"Kafka protocol reference not found at {SPEC_DIR}")

# APIs declared from apache/kafka's JSON but absent from the reference folder (see each module's docstring).
# The transaction APIs (24-28, 61, 65, 66) and DescribeLogDirs (35) are checked against apache/kafka's JSON in
# test_txn_messages.py instead, the KIP-848 APIs (68, 69) in test_kip848_messages.py; the telemetry APIs (71, 72,
# KIP-714) follow Kafka 3.7+'s JSON, in neither folder. The share-group APIs (76-79, 90-92, KIP-932) are in neither
# folder either (kafka-python vendors none of them): test_share_messages.py checks them against apache/kafka's v0
# JSON and by bytes built by hand.
NO_REFERENCE = {24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
                28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs",
                35: "DescribeLogDirs", 42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
                45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 47: "OffsetDelete",
                50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials", 56: "AlterPartition",
                61: "DescribeProducers", 64: "UnregisterBroker", 65: "DescribeTransactions",
                66: "ListTransactions", 67: "AllocateProducerIds", 68: "ConsumerGroupHeartbeat",
                69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
                76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge",
                84: "ReadShareGroupState", 85: "WriteShareGroupState",
                90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets"}
# APIs newer than the reference folder (Kafka 4.x), checked against the 4.x JSON kafka-python vendors.
NEWER_ONLY = {34: "AlterReplicaLogDirs", 48: "DescribeClientQuotas", 49: "AlterClientQuotas", 55: "DescribeQuorum",
              74: "ListConfigResources", 75: "DescribeTopicPartitions"}

# Deliberate additions to Kafka's schemas: (message name, dotted field path) -> why.
EXTENSIONS = {
    ("ProduceRequest", "topic_data.partition_data.current_leader_epoch"): "KIP-359 leader epoch on produce",
}

# What a field without a JSON default holds in Kafka's generated code.
KAFKA_TYPE_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": bytes(16),
}


@dataclass(frozen=True)
class FieldView:
    """One field as seen at one version, named by its dotted path; built alike from JSON and declaration."""

    path: str
    type: str
    versions: str
    nullable: str
    nullable_here: bool
    tag: int | None
    tagged: str
    tagged_here: bool
    flexible: str | None
    default: Any


def load_spec(name: str, version: int | None = None) -> dict[str, Any]:
    """A JSON schema file without its full-line `//` comments: Kafka 3.9's, or the 4.x one for a `version`
    past 3.9's (or for an API the 3.9 folder does not have)."""
    reference = SPEC_DIR / f"{name}.json"
    if reference.is_file():
        spec = _read_spec(reference)
        if version is None or version <= VersionRange.parse(spec["validVersions"]).high:
            return spec
    return _read_spec(NEWER_SPEC_DIR / f"{name}.json")


def _read_spec(path: Path) -> dict[str, Any]:
    text = path.read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def json_default(kafka_type: str, spec: dict[str, Any]) -> Any:
    if kafka_type.startswith("[]"):
        return None if spec.get("default") == "null" else []
    if kafka_type not in KAFKA_TYPE_DEFAULTS:
        # a nullable struct defaults to null (written "null", or a JSON null in group-coordinator's records)
        return None if "default" in spec and spec["default"] in ("null", None) else "struct"
    if "default" not in spec:
        return KAFKA_TYPE_DEFAULTS[kafka_type]
    value = spec["default"]
    if not isinstance(value, str):
        return value
    if value == "null":
        return None
    if kafka_type == "bool":
        return {"true": True, "false": False}[value]
    if kafka_type.startswith(("int", "uint")):
        return int(value, 0)
    if kafka_type == "float64":
        return float(value)
    return value


def reference_view(
    fields: list[dict[str, Any]], version: int, common: dict[str, list[dict[str, Any]]], path: str = ""
) -> list[FieldView]:
    """The fields present at `version`, depth first in wire order (nested struct fields after their parent)."""
    views = []
    for spec in fields:
        if version not in VersionRange.parse(spec["versions"]):
            continue
        kafka_type = spec["type"]
        dotted = f"{path}{snake_case(spec['name'])}"
        tagged = VersionRange.parse(spec.get("taggedVersions", "none"))
        nullable = VersionRange.parse(spec.get("nullableVersions", "none"))
        views.append(
            FieldView(
                path=dotted,
                type=kafka_type,
                versions=str(VersionRange.parse(spec["versions"])),
                nullable=str(nullable),
                nullable_here=version in nullable,
                tag=int(spec["tag"]) if "tag" in spec else None,
                tagged=str(tagged),
                tagged_here=version in tagged,
                flexible=spec.get("flexibleVersions"),
                default=json_default(kafka_type, spec),
            )
        )
        nested = spec.get("fields", common.get(kafka_type.removeprefix("[]")))
        if nested is not None:
            views += reference_view(nested, version, common, f"{dotted}.")
    return views


def declared_default(field: Field, owner: type) -> Any:
    value = getattr(owner(), field.name)
    if field.is_array or not field.is_struct:
        return value
    return "struct" if value is not None else None


def declared_view(
    message: Message, fields: list[Field], owner: type, version: int, path: str = ""
) -> list[FieldView]:
    views = []
    for field in fields:
        dotted = f"{path}{field.name}"
        if version not in field.versions or (message.name, dotted) in EXTENSIONS:
            continue
        views.append(
            FieldView(
                path=dotted,
                type=field.type,
                versions=str(field.versions),
                nullable=str(field.nullable),
                nullable_here=version in field.nullable,
                tag=field.tag,
                tagged=str(field.tagged),
                tagged_here=version in field.tagged,
                flexible=None if field.flexible is None else str(field.flexible),
                default=declared_default(field, owner),
            )
        )
        if field.fields is not None:
            nested_owner = message.types[field.element_type]
            views += declared_view(message, field.fields, nested_owner, version, f"{dotted}.")
    return views


def claimed_versions() -> list[Any]:
    cases = []
    for key, api in sorted(APIS.items()):
        if key in NO_REFERENCE:
            continue
        for message in (api.request, api.response):
            for version in range(message.versions.low, message.versions.high + 1):
                cases.append(pytest.param(message, version, id=f"{message.name}-v{version}"))
    return cases


def test_every_reference_api_is_declared_and_only_the_listed_ones_lack_a_reference() -> None:
    reference_keys = {load_spec(path.stem)["apiKey"] for path in SPEC_DIR.glob("*Request.json")}
    assert reference_keys <= set(APIS)
    assert set(APIS) - reference_keys == set(NO_REFERENCE) | set(NEWER_ONLY)
    assert {key: APIS[key].name for key in NEWER_ONLY} == NEWER_ONLY
    assert {key: APIS[key].name for key in NO_REFERENCE} == NO_REFERENCE


@pytest.mark.parametrize("message", [m for a in APIS.values() if a.key not in NO_REFERENCE
                                     for m in (a.request, a.response)], ids=lambda m: m.name)
def test_message_header_matches_reference(message: Message) -> None:
    spec = load_spec(message.name, message.versions.high)
    assert (message.api_key, message.kind) == (spec["apiKey"], spec["type"])
    valid = VersionRange.parse(spec["validVersions"])
    assert valid.low <= message.versions.low <= message.versions.high <= valid.high, f"valid {valid}"
    assert str(message.flexible) == str(VersionRange.parse(spec["flexibleVersions"]))


@pytest.mark.parametrize(("message", "version"), claimed_versions())
def test_fields_match_reference_at_version(message: Message, version: int) -> None:
    # a message declared past 3.9 follows the 4.x JSON at every version: it may re-state an old field's
    # versions (Produce's Name "0+" became "0-12" with v13's TopicId)
    spec = load_spec(message.name, message.versions.high)
    common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", [])}
    expected = reference_view(spec["fields"], version, common)
    actual = declared_view(message, message.fields, message.cls, version)
    assert actual == expected


def test_the_produce_leader_epoch_extension_is_exactly_as_documented() -> None:
    produce = APIS[0].request
    (topic_data,) = [f for f in produce.fields if f.name == "topic_data"]
    (partition,) = [f for f in topic_data.fields or [] if f.name == "partition_data"]
    (extension,) = [f for f in partition.fields or [] if f.name == "current_leader_epoch"]
    assert (extension.type, str(extension.versions), extension.tag, str(extension.tagged)) == (
        "int32", "9+", 10000, "9+"
    )
    assert produce.PartitionProduceData().current_leader_epoch == -1
    spec = load_spec("ProduceRequest")
    (topic_spec,) = [f for f in spec["fields"] if f["name"] == "TopicData"]
    (partition_data,) = [f for f in topic_spec["fields"] if f["name"] == "PartitionData"]
    assert all(int(f.get("tag", -1)) != 10000 for f in partition_data["fields"])
    assert not any(snake_case(f["name"]) == "current_leader_epoch" for f in partition_data["fields"])

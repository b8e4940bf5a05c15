"""Transaction APIs (24 AddPartitionsToTxn, 25 AddOffsetsToTxn, 26 EndTxn, 27 WriteTxnMarkers, 28
TxnOffsetCommit, 61 DescribeProducers, 65 DescribeTransactions, 66 ListTransactions) and 35 DescribeLogDirs.

The reference folder has no JSON for these APIs, so the declarations are checked here against apache/kafka's own
message JSON, read with `git show` from the apache/kafka mirror beside the repository (Kafka 3.9: the 3.9.0 tag
or the 3.9 branch, else the mirror's HEAD; KAFKA_MIRROR and KAFKA_SCHEMA_REF override), field by field at every
declared version with test_conformance's comparison. That one test is skipped where the mirror is absent (a
fresh clone in CI); everything else here runs everywhere.

Then: round trips at every declared version with realistic values (a checkout service's transaction over
payments and ledger partitions, its consumer offsets, the coordinator's markers, a broker's log dirs, an admin
hunting hanging transactions), a few bodies built by hand from the JSON, and, where kafka-python is installed,
its independent codec reading what we write and writing it back unchanged.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import (
    APIS,
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    end_txn,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
)
from epoch_broker.protocol.schema import Message
from epoch_broker.protocol.versions import VersionRange
from tests.protocol.test_acl_scram_messages import (
    NO_TAGS,
    assert_round_trip,
    classic_string,
    compact_string,
    int16,
    int32,
    on_the_wire,
)
from tests.protocol.test_acl_scram_messages import every_version as every_sample_version
from tests.protocol.test_conformance import NO_REFERENCE, declared_view, load_spec, reference_view

MIRROR = Path(
    os.environ.get("KAFKA_MIRROR", Path(__file__).resolve().parents[3] / ".mirror" / "apache+kafka" / "repo")
)
SCHEMA_DIR = "clients/src/main/resources/common/message"


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(MIRROR), *args], capture_output=True, text=True, check=False)


@functools.cache
def schema_ref() -> str | None:
    """The first of the Kafka 3.9 refs the mirror has (HEAD, trunk, as the last resort); None without a mirror."""
    if shutil.which("git") is None or not (MIRROR / "HEAD").is_file():
        return None
    candidates = [os.environ.get("KAFKA_SCHEMA_REF", ""), "refs/tags/3.9.0", "refs/heads/3.9", "HEAD"]
    for ref in filter(None, candidates):
        if git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0:
            return ref
    return None


@functools.cache
def kafka_json(name: str) -> dict[str, Any]:
    """apache/kafka's message JSON `name`.json, without its full-line `//` comments (skips without the mirror)."""
    ref = schema_ref()
    if ref is None:
        pytest.skip(f"apache/kafka mirror not found at {MIRROR}")
    shown = git("show", f"{ref}:{SCHEMA_DIR}/{name}.json")
    assert shown.returncode == 0, shown.stderr
    return json.loads("\n".join(line for line in shown.stdout.splitlines() if not line.lstrip().startswith("//")))


# key -> (module, name, declared versions, first flexible version, kafka-python module)
DECLARED: dict[int, tuple[Any, str, tuple[int, int], int, str]] = {
    24: (add_partitions_to_txn, "AddPartitionsToTxn", (0, 5), 3, "producer.transaction"),
    25: (add_offsets_to_txn, "AddOffsetsToTxn", (0, 4), 3, "producer.transaction"),
    26: (end_txn, "EndTxn", (0, 4), 3, "producer.transaction"),
    27: (write_txn_markers, "WriteTxnMarkers", (0, 1), 1, "producer.transaction"),
    28: (txn_offset_commit, "TxnOffsetCommit", (0, 4), 3, "producer.transaction"),
    35: (describe_log_dirs, "DescribeLogDirs", (0, 4), 2, "admin.cluster"),
    61: (describe_producers, "DescribeProducers", (0, 0), 0, "admin.transactions"),
    65: (describe_transactions, "DescribeTransactions", (0, 0), 0, "admin.transactions"),
    66: (list_transactions, "ListTransactions", (0, 2), 0, "admin.transactions"),
}
MESSAGES = [m for module, *_ in DECLARED.values() for m in (module.REQUEST, module.RESPONSE)]


def declared_versions(message: Message) -> range:
    return range(message.versions.low, message.versions.high + 1)


# -- declarations against Kafka's JSON ----------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(DECLARED))
def test_each_api_is_registered_under_its_key_with_the_declared_versions(key: int) -> None:
    module, name, (low, high), flexible, _ = DECLARED[key]
    api = APIS[key]
    assert api is module.API
    assert (api.name, api.versions.low, api.versions.high) == (name, low, high)
    assert NO_REFERENCE[key] == name  # not in the reference folder: checked here instead
    for version in range(low, high + 1):
        is_flexible = version >= flexible
        assert (version in api.request.flexible, version in api.response.flexible) == (is_flexible, is_flexible)
        assert api.request_header_version(version) == (2 if is_flexible else 1)
        assert api.response_header_version(version) == (1 if is_flexible else 0)


def test_every_declaration_matches_kafka_json() -> None:
    """Each message's key, kind, versions and flexible range, then its fields at every declared version, against
    apache/kafka's JSON (one test: without the mirror, one skip)."""
    for message in MESSAGES:
        spec = kafka_json(message.name)
        if message.versions.high > VersionRange.parse(spec["validVersions"]).high:
            spec = load_spec(message.name, message.versions.high)  # newer than the mirror: Kafka 4.x's JSON
        assert (spec["name"], spec["apiKey"], spec["type"]) == (message.name, message.api_key, message.kind)
        valid = VersionRange.parse(spec["validVersions"])
        assert valid.low <= message.versions.low <= message.versions.high <= valid.high, f"valid {valid}"
        assert str(message.flexible) == str(VersionRange.parse(spec["flexibleVersions"])), message.name
        common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", [])}
        for version in declared_versions(message):
            expected = reference_view(spec["fields"], version, common)
            assert declared_view(message, message.fields, message.cls, version) == expected, (message.name, version)


# -- realistic values ---------------------------------------------------------------------------------------

TXN_ID, PRODUCER_ID, EPOCH = "checkout-txn-7", 4001, 3
GROUP = "checkout-service"
MEMBER = "consumer-checkout-service-1-5f1c2d8e-6a55-4f7b-9d3c-1b2a3c4d5e6f"


def add_partitions_request(version: int) -> Any:
    request = add_partitions_to_txn.REQUEST
    topic = request.AddPartitionsToTxnTopic
    topics = [topic(name="payments", partitions=[0, 2, 5]), topic(name="ledger", partitions=[1])]
    if version <= 3:  # a producer adding the partitions it is about to write to
        return request.cls(v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=PRODUCER_ID,
                           v3_and_below_producer_epoch=EPOCH, v3_and_below_topics=topics)
    # a partition leader verifying two producers' transactions before appending their batches (KIP-890)
    transaction = request.AddPartitionsToTxnTransaction
    return request.cls(transactions=[
        transaction(transactional_id=TXN_ID, producer_id=PRODUCER_ID, producer_epoch=EPOCH, verify_only=True,
                    topics=topics),
        transaction(transactional_id="refunds-txn-2", producer_id=4002, producer_epoch=0, verify_only=True,
                    topics=[topic(name="refunds", partitions=[3])]),
    ])


def add_partitions_response(version: int) -> Any:
    response = add_partitions_to_txn.RESPONSE
    result, partition = response.AddPartitionsToTxnTopicResult, response.AddPartitionsToTxnPartitionResult
    payments = result(name="payments", results_by_partition=[
        partition(partition_index=0, partition_error_code=0),
        partition(partition_index=2, partition_error_code=0),
        partition(partition_index=5, partition_error_code=ErrorCode.CONCURRENT_TRANSACTIONS),
    ])
    ledger = result(name="ledger", results_by_partition=[partition(partition_index=1, partition_error_code=0)])
    if version <= 3:
        return response.cls(throttle_time_ms=0, results_by_topic_v3_and_below=[payments, ledger])
    refunds = result(name="refunds", results_by_partition=[
        partition(partition_index=3, partition_error_code=ErrorCode.INVALID_PRODUCER_ID_MAPPING)])
    by_transaction = response.AddPartitionsToTxnResult
    return response.cls(throttle_time_ms=0, error_code=0, results_by_transaction=[
        by_transaction(transactional_id=TXN_ID, topic_results=[payments, ledger]),
        by_transaction(transactional_id="refunds-txn-2", topic_results=[refunds]),
    ])


def add_offsets_request(version: int) -> Any:
    return add_offsets_to_txn.REQUEST.cls(transactional_id=TXN_ID, producer_id=PRODUCER_ID, producer_epoch=EPOCH,
                                          group_id=GROUP)


def add_offsets_response(version: int) -> Any:
    return add_offsets_to_txn.RESPONSE.cls(throttle_time_ms=0, error_code=0)


def add_offsets_fenced(version: int) -> Any:
    # PRODUCER_FENCED exists from v2; older clients get INVALID_PRODUCER_EPOCH for the same condition
    code = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    return add_offsets_to_txn.RESPONSE.cls(throttle_time_ms=150, error_code=code)


def end_txn_commit(version: int) -> Any:
    return end_txn.REQUEST.cls(transactional_id=TXN_ID, producer_id=PRODUCER_ID, producer_epoch=EPOCH,
                               committed=True)


def end_txn_abort(version: int) -> Any:
    return end_txn.REQUEST.cls(transactional_id="refunds-txn-2", producer_id=4002, producer_epoch=0,
                               committed=False)


def end_txn_response(version: int) -> Any:
    return end_txn.RESPONSE.cls(throttle_time_ms=0, error_code=0)


def end_txn_invalid_state(version: int) -> Any:
    return end_txn.RESPONSE.cls(throttle_time_ms=0, error_code=ErrorCode.INVALID_TXN_STATE)


def write_markers_request(version: int) -> Any:
    request = write_txn_markers.REQUEST
    marker, topic = request.WritableTxnMarker, request.WritableTxnMarkerTopic
    return request.cls(markers=[
        marker(producer_id=PRODUCER_ID, producer_epoch=EPOCH, transaction_result=True, coordinator_epoch=7,
               topics=[topic(name="payments", partition_indexes=[0, 2, 5]),
                       topic(name="ledger", partition_indexes=[1]),
                       topic(name="__consumer_offsets", partition_indexes=[12])]),
        marker(producer_id=4002, producer_epoch=0, transaction_result=False, coordinator_epoch=7,
               topics=[topic(name="refunds", partition_indexes=[3])]),
    ])


def write_markers_response(version: int) -> Any:
    response = write_txn_markers.RESPONSE
    result, topic = response.WritableTxnMarkerResult, response.WritableTxnMarkerTopicResult
    partition = response.WritableTxnMarkerPartitionResult
    return response.cls(markers=[
        result(producer_id=PRODUCER_ID, topics=[
            topic(name="payments", partitions=[partition(partition_index=i, error_code=0) for i in (0, 2, 5)]),
            topic(name="ledger", partitions=[partition(partition_index=1, error_code=0)]),
            topic(name="__consumer_offsets", partitions=[partition(partition_index=12, error_code=0)]),
        ]),
        result(producer_id=4002, topics=[
            topic(name="refunds", partitions=[partition(partition_index=3,
                                                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)]),
        ]),
    ])


def txn_offset_commit_request(version: int) -> Any:
    request = txn_offset_commit.REQUEST
    partition = request.TxnOffsetCommitRequestPartition
    epoch = 4 if version >= 2 else -1
    obj = request.cls(transactional_id=TXN_ID, group_id=GROUP, producer_id=PRODUCER_ID, producer_epoch=EPOCH,
                      topics=[request.TxnOffsetCommitRequestTopic(name="orders", partitions=[
                          partition(partition_index=0, committed_offset=1500, committed_leader_epoch=epoch,
                                    committed_metadata=None),
                          partition(partition_index=1, committed_offset=1732, committed_leader_epoch=epoch,
                                    committed_metadata="batch 42"),
                      ])])
    if version >= 3:  # the consumer's group metadata, so the coordinator can fence zombies (KIP-447)
        obj.generation_id, obj.member_id, obj.group_instance_id = 12, MEMBER, "checkout-1"
    return obj


def txn_offset_commit_response(version: int) -> Any:
    response = txn_offset_commit.RESPONSE
    partition = response.TxnOffsetCommitResponsePartition
    late = ErrorCode.ILLEGAL_GENERATION if version >= 3 else ErrorCode.INVALID_PRODUCER_EPOCH
    return response.cls(throttle_time_ms=0, topics=[response.TxnOffsetCommitResponseTopic(name="orders", partitions=[
        partition(partition_index=0, error_code=0), partition(partition_index=1, error_code=late),
    ])])


def describe_log_dirs_request(version: int) -> Any:
    topic = describe_log_dirs.REQUEST.DescribableLogDirTopic
    return describe_log_dirs.REQUEST.cls(topics=[topic(topic="payments", partitions=[0, 2, 5]),
                                                 topic(topic="ledger", partitions=[1])])


def describe_all_log_dirs(version: int) -> Any:
    return describe_log_dirs.REQUEST.cls(topics=None)


def describe_log_dirs_response(version: int) -> Any:
    response = describe_log_dirs.RESPONSE
    partition, topic = response.DescribeLogDirsPartition, response.DescribeLogDirsTopic
    data = response.DescribeLogDirsResult(error_code=0, log_dir="/var/lib/epoch-broker/data-0", topics=[
        topic(name="payments", partitions=[
            partition(partition_index=0, partition_size=734003200, offset_lag=0, is_future_key=False),
            partition(partition_index=2, partition_size=12582912, offset_lag=4096, is_future_key=True),
        ]),
    ])
    broken = response.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                                            log_dir="/var/lib/epoch-broker/data-1", topics=[])
    if version >= 4:  # KIP-827: the volume's size and free space
        data.total_bytes, data.usable_bytes = 500107862016, 211527131136
    return response.cls(throttle_time_ms=0, error_code=0, results=[data, broken])


def describe_producers_request(version: int) -> Any:
    topic = describe_producers.REQUEST.TopicRequest
    return describe_producers.REQUEST.cls(topics=[topic(name="payments", partition_indexes=[0, 1])])


def describe_producers_response(version: int) -> Any:
    response = describe_producers.RESPONSE
    state, partition = response.ProducerState, response.PartitionResponse
    return response.cls(throttle_time_ms=0, topics=[response.TopicResponse(name="payments", partitions=[
        partition(partition_index=0, error_code=0, error_message=None, active_producers=[
            # transactional, with an open transaction since offset 1500
            state(producer_id=PRODUCER_ID, producer_epoch=EPOCH, last_sequence=311, last_timestamp=1730000000123,
                  coordinator_epoch=7, current_txn_start_offset=1500),
            # idempotent only: no coordinator, no transaction
            state(producer_id=5007, producer_epoch=0, last_sequence=9, last_timestamp=1730000000456,
                  coordinator_epoch=-1, current_txn_start_offset=-1),
        ]),
        partition(partition_index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                  error_message="Broker 2 is not the leader of payments-1", active_producers=[]),
    ])])


def describe_transactions_request(version: int) -> Any:
    return describe_transactions.REQUEST.cls(transactional_ids=[TXN_ID, "refunds-txn-2", "gone-txn"])


def describe_transactions_response(version: int) -> Any:
    response = describe_transactions.RESPONSE
    state, topic = response.TransactionState, response.TopicData
    return response.cls(throttle_time_ms=0, transaction_states=[
        state(error_code=0, transactional_id=TXN_ID, transaction_state="Ongoing", transaction_timeout_ms=60000,
              transaction_start_time_ms=1730000000000, producer_id=PRODUCER_ID, producer_epoch=EPOCH,
              topics=[topic(topic="payments", partitions=[0, 2, 5]), topic(topic="ledger", partitions=[1])]),
        state(error_code=0, transactional_id="refunds-txn-2", transaction_state="CompleteCommit",
              transaction_timeout_ms=60000, transaction_start_time_ms=-1, producer_id=4002, producer_epoch=0,
              topics=[]),
        state(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id="gone-txn", transaction_state="",
              transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]),
    ])


def list_transactions_request(version: int) -> Any:
    return list_transactions.REQUEST.cls(state_filters=["Ongoing", "PrepareCommit", "Hanging"],
                                         producer_id_filters=[PRODUCER_ID, 4002])


def list_all_transactions(version: int) -> Any:
    return list_transactions.REQUEST.cls(state_filters=[], producer_id_filters=[])


def list_transactions_response(version: int) -> Any:
    state = list_transactions.RESPONSE.TransactionState
    return list_transactions.RESPONSE.cls(throttle_time_ms=0, error_code=0, unknown_state_filters=["Hanging"],
                                          transaction_states=[
        state(transactional_id=TXN_ID, producer_id=PRODUCER_ID, transaction_state="Ongoing"),
        state(transactional_id="refunds-txn-2", producer_id=4002, transaction_state="PrepareCommit"),
    ])


SAMPLES: list[tuple[str, Message, Callable[[int], Any]]] = [
    ("add-partitions-request", add_partitions_to_txn.REQUEST, add_partitions_request),
    ("add-partitions-response", add_partitions_to_txn.RESPONSE, add_partitions_response),
    ("add-offsets-request", add_offsets_to_txn.REQUEST, add_offsets_request),
    ("add-offsets-response", add_offsets_to_txn.RESPONSE, add_offsets_response),
    ("add-offsets-response-fenced", add_offsets_to_txn.RESPONSE, add_offsets_fenced),
    ("end-txn-commit", end_txn.REQUEST, end_txn_commit),
    ("end-txn-abort", end_txn.REQUEST, end_txn_abort),
    ("end-txn-response", end_txn.RESPONSE, end_txn_response),
    ("end-txn-response-invalid-state", end_txn.RESPONSE, end_txn_invalid_state),
    ("write-markers-request", write_txn_markers.REQUEST, write_markers_request),
    ("write-markers-response", write_txn_markers.RESPONSE, write_markers_response),
    ("txn-offset-commit-request", txn_offset_commit.REQUEST, txn_offset_commit_request),
    ("txn-offset-commit-response", txn_offset_commit.RESPONSE, txn_offset_commit_response),
    ("describe-log-dirs-request", describe_log_dirs.REQUEST, describe_log_dirs_request),
    ("describe-log-dirs-request-all", describe_log_dirs.REQUEST, describe_all_log_dirs),
    ("describe-log-dirs-response", describe_log_dirs.RESPONSE, describe_log_dirs_response),
    ("describe-producers-request", describe_producers.REQUEST, describe_producers_request),
    ("describe-producers-response", describe_producers.RESPONSE, describe_producers_response),
    ("describe-transactions-request", describe_transactions.REQUEST, describe_transactions_request),
    ("describe-transactions-response", describe_transactions.RESPONSE, describe_transactions_response),
    ("list-transactions-request", list_transactions.REQUEST, list_transactions_request),
    ("list-transactions-request-all", list_transactions.REQUEST, list_all_transactions),
    ("list-transactions-response", list_transactions.RESPONSE, list_transactions_response),
]


def every_version() -> list[Any]:
    return every_sample_version(SAMPLES)


def test_every_declared_message_has_a_realistic_sample() -> None:
    assert {message.name for _, message, _ in SAMPLES} == {message.name for message in MESSAGES}


# -- round trips --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "build", "version"), every_version())
def test_realistic_messages_round_trip_at_every_version(
    message: Message, build: Callable[[int], Any], version: int
) -> None:
    assert_round_trip(message, build(version), version)


def test_defaults_follow_kafka_json() -> None:
    request = txn_offset_commit.REQUEST.cls()
    assert (request.generation_id, request.member_id, request.group_instance_id) == (-1, "", None)
    assert txn_offset_commit.REQUEST.TxnOffsetCommitRequestPartition().committed_leader_epoch == -1
    assert txn_offset_commit.REQUEST.TxnOffsetCommitRequestPartition().committed_metadata == ""
    state = describe_producers.RESPONSE.ProducerState()
    assert (state.last_sequence, state.last_timestamp, state.current_txn_start_offset) == (-1, -1, -1)
    assert describe_producers.RESPONSE.PartitionResponse().error_message is None
    result = describe_log_dirs.RESPONSE.DescribeLogDirsResult()
    assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    assert describe_log_dirs.REQUEST.cls().topics == []  # no JSON default: empty, though null is allowed
    assert add_partitions_to_txn.REQUEST.AddPartitionsToTxnTransaction().verify_only is False


def test_fields_of_a_later_version_decode_as_their_default() -> None:
    request = txn_offset_commit_request(3)
    decoded = txn_offset_commit.REQUEST.decode(txn_offset_commit.REQUEST.encode(request, 1), 1)
    assert (decoded.generation_id, decoded.member_id, decoded.group_instance_id) == (-1, "", None)
    assert [p.committed_leader_epoch for p in decoded.topics[0].partitions] == [-1, -1]
    assert [p.committed_offset for p in decoded.topics[0].partitions] == [1500, 1732]
    response = describe_log_dirs_response(4)
    decoded = describe_log_dirs.RESPONSE.decode(describe_log_dirs.RESPONSE.encode(response, 3), 3)
    assert (decoded.results[0].total_bytes, decoded.results[0].usable_bytes) == (-1, -1)


def test_add_partitions_v4_carries_transactions_and_v3_the_flat_fields() -> None:
    request = add_partitions_to_txn.REQUEST
    v4 = request.decode(request.encode(add_partitions_request(4), 4), 4)
    assert [t.transactional_id for t in v4.transactions] == [TXN_ID, "refunds-txn-2"]
    assert v4.v3_and_below_topics == [] and v4.v3_and_below_transactional_id == ""
    # the flat fields are not on the wire at v4: the same object encodes the same bytes without them
    mixed = add_partitions_request(4)
    mixed.v3_and_below_transactional_id = "ignored"
    assert request.encode(mixed, 4) == request.encode(add_partitions_request(4), 4)


# -- bytes built by hand from the JSON ----------------------------------------------------------------------


def int64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


def test_end_txn_v0_and_v3_requests_match_bytes_built_by_hand() -> None:
    fixed = int64(PRODUCER_ID) + int16(EPOCH) + b"\x01"  # committed: true
    assert end_txn.REQUEST.encode(end_txn_commit(0), 0) == classic_string(TXN_ID) + fixed
    flexible = compact_string(TXN_ID) + fixed + NO_TAGS
    assert end_txn.REQUEST.encode(end_txn_commit(3), 3) == flexible
    assert end_txn.REQUEST.decode(flexible, 3) == end_txn_commit(3)


def test_add_partitions_v3_request_matches_bytes_built_by_hand() -> None:
    def topic(name: str, partitions: list[int]) -> bytes:
        return compact_string(name) + bytes([len(partitions) + 1]) + b"".join(map(int32, partitions)) + NO_TAGS

    body = (compact_string(TXN_ID) + int64(PRODUCER_ID) + int16(EPOCH)
            + b"\x03" + topic("payments", [0, 2, 5]) + topic("ledger", [1]) + NO_TAGS)
    assert add_partitions_to_txn.REQUEST.encode(add_partitions_request(3), 3) == body
    assert add_partitions_to_txn.REQUEST.decode(body, 3) == add_partitions_request(3)


def test_txn_offset_commit_v2_request_matches_bytes_built_by_hand() -> None:
    partitions = (int32(2) + int32(0) + int64(1500) + int32(4) + int16(-1)  # metadata: null
                  + int32(1) + int64(1732) + int32(4) + classic_string("batch 42"))
    body = (classic_string(TXN_ID) + classic_string(GROUP) + int64(PRODUCER_ID) + int16(EPOCH)
            + int32(1) + classic_string("orders") + partitions)
    assert txn_offset_commit.REQUEST.encode(txn_offset_commit_request(2), 2) == body
    assert txn_offset_commit.REQUEST.decode(body, 2) == txn_offset_commit_request(2)


def test_describe_log_dirs_null_topics_means_every_topic() -> None:
    request = describe_log_dirs.REQUEST
    assert request.encode(describe_all_log_dirs(1), 1) == int32(-1)
    assert request.encode(describe_all_log_dirs(2), 2) == b"\x00" + NO_TAGS
    assert request.encode(request.cls(topics=[]), 2) == b"\x01" + NO_TAGS
    assert request.decode(b"\x00\x00", 2).topics is None


def test_list_transactions_request_matches_bytes_built_by_hand() -> None:
    body = (b"\x04" + compact_string("Ongoing") + compact_string("PrepareCommit") + compact_string("Hanging")
            + b"\x03" + int64(PRODUCER_ID) + int64(4002) + NO_TAGS)
    assert list_transactions.REQUEST.encode(list_transactions_request(0), 0) == body
    assert list_transactions.REQUEST.decode(body, 0) == list_transactions_request(0)
    assert list_transactions.REQUEST.encode(list_all_transactions(0), 0) == b"\x01\x01" + NO_TAGS


# -- kafka-python's codec, an independent implementation of the same JSON -----------------------------------


def kafka_python_class(message: Message) -> Any:
    module = DECLARED[message.api_key or 0][4]
    return getattr(importlib.import_module(f"kafka.protocol.{module}"), message.name)


def kafka_python_versions() -> list[Any]:
    """The samples at the versions kafka-python's codec has too (it dropped WriteTxnMarkers and DescribeLogDirs
    v0)."""
    return [param for param in every_version()
            if (versions := kafka_python_class(param.values[0]).valid_versions)[0] <= param.values[2] <= versions[1]]


@pytest.mark.parametrize(("message", "build", "version"), kafka_python_versions())
def test_kafka_python_reads_what_we_write_and_writes_the_same_bytes(
    message: Message, build: Callable[[int], Any], version: int
) -> None:
    theirs_cls = kafka_python_class(message)
    original = build(version)
    encoded = message.encode(original, version)
    theirs = theirs_cls.decode(encoded, version=version)
    assert theirs.to_dict(json=False) == on_the_wire(message.fields, original, version)
    assert bytes(theirs.encode()) == encoded

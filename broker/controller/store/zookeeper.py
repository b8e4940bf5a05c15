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
- Each append writes Kafka's znodes (`/brokers/ids`, `/brokers/topics/...`, kafka_znodes.py) with the view of
  what it changed in the same multi-op (or, past the request limit, in more multi-ops fenced the same way
  after it); a newly elected controller writes the whole view again. A view that could not be written is
  written whole again (after the next append, if ZooKeeper failed that too): the log stays the truth, and once
  a batch is committed nothing about the view makes `append` fail.
- Reads hand out a batch once: `follow` moves its position only when it returns.
- A standby follows: `follow` returns the batches appended since it last read, by name (the next sequential
  name), so a standby's cost per append does not grow with the log; `watch` tells it when to look. `elect`
  catches up the same way before it returns, so the new controller starts from the whole log.
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

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from epoch_broker.broker.config import BrokerConfig, StartupError
from epoch_broker.broker.controller.store import NotController
from epoch_broker.broker.controller.store.kafka_znodes import KafkaZnodes, Op
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import from_json, to_json
from epoch_broker.broker.metadata.stored_log import CorruptMetadataLog

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
        self._on_change: Callable[[], None] | None = None  # `watch`'s callback
        self._image_stale = False  # `image` holds records of an append that failed
        self._view_stale = False  # Kafka's znodes missed a change: written whole after the next append
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
        if self._image_stale:  # an append of an earlier term failed after applying its records: read again
            self._reread_image()
        records = self.follow()  # after the epoch moved: the predecessor can append nothing more
        self._sync_view()
        return records

    def _sync_view(self) -> None:
        """Write the whole view; if ZooKeeper fails it, it is written again after the next append (the view is
        never read back: the records stay this store's to hand out)."""
        self._view_stale = True
        try:
            self.view.sync(self.image, self.epoch)
        except KazooException:
            return
        self._view_stale = False

    def confirm(self) -> None:
        """Raise NotController unless the controller epoch is still the one this store set and this session still
        holds the claim (kazoo opens a new session quietly after one expired: the claim went with the old one)."""
        epoch = self.client.exists(self._path(CONTROLLER_EPOCH))
        claim = self.client.exists(self._path(CONTROLLER))
        if self._epoch_version < 0 or epoch is None or epoch.version != self._epoch_version:
            self._epoch_version = -1
            raise NotController(f"controller epoch {self.epoch} is over: another controller was elected")
        if claim is None or claim.ephemeralOwner != self.client.client_id[0]:
            self._epoch_version = -1
            raise NotController(f"the session of controller epoch {self.epoch} expired")

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

    def watch(self, on_change: Callable[[], None], on_disconnect: Callable[[], None]) -> None:
        """Call `on_change` (on kazoo's thread) when the elected controller changes, when the batch after the
        last one read is appended (each `follow` leaves a watch on it) and when the connection comes back;
        `on_disconnect` when kazoo finds the connection lost (no answer within two thirds of the session)."""
        self._on_change = on_change
        self.client.DataWatch(self._path(CONTROLLER), lambda _data, _stat: on_change())

        def connection(state: str) -> None:
            (on_change if state == KazooState.CONNECTED else on_disconnect)()

        self.client.add_listener(connection)

    def _next_batch_appended(self, _event: object) -> None:
        if self._on_change is not None:
            self._on_change()

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
        records: list[Any] = []
        names = sorted(self.client.get_children(self._path(LOG)))
        for name in names:
            records += self._read_batch(name)
        self._last_batch = names[-1] if names else ""
        for record in records:
            self.image.apply(record)
        return records + self.follow()  # and leave the watch

    def _reread_image(self) -> None:
        """`image` made again from the batches read so far."""
        image = MetadataCache()
        for name in sorted(n for n in self.client.get_children(self._path(LOG)) if n <= self._last_batch):
            for record in self._read_batch(name):
                image.apply(record)
        self.image, self._image_stale = image, False

    def follow(self) -> list[Any]:
        """The records of the batches appended since the last `load`, `follow` or `elect` (applied to `image`).

        Read by name, without listing the log: sequential names count up by one, as batches are only ever created
        (and nothing else under the log). Where the next batch does not exist yet, a watch is left on its name."""
        log = self._path(LOG)
        records: list[Any] = []
        last = self._last_batch
        while True:
            name = f"{BATCH_PREFIX}{int(last[len(BATCH_PREFIX):] or -1) + 1:010d}"
            try:
                records += self._read_batch(name)
            except NoNodeError:
                if self._on_change is None or self.client.exists(f"{log}/{name}",
                                                                 watch=self._next_batch_appended) is None:
                    break  # (else it was appended meanwhile: read it)
                continue
            last = name
        self._last_batch = last  # only now: a read that failed midway hands out nothing and is done again
        for record in records:
            self.image.apply(record)
        return records

    def _read_batch(self, name: str) -> list[Any]:
        """The records of one batch (its chunks read too)."""
        path = f"{self._path(LOG)}/{name}"
        data, _ = self.client.get(path)
        if data.startswith(CHUNKED):
            data = b"".join(self.client.get(self._path(f"{CHUNKS}/{chunk}"))[0]
                            for chunk in data[len(CHUNKED):].decode().split())
        records = []
        for number, line in enumerate(data.decode().splitlines()):
            try:
                records.append(from_json(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptMetadataLog(f"{path}: bad record on line {number + 1}: {exc}") from exc
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
        self._image_stale = True  # until the batch is committed, `image` has records the log may never get
        ops = self.view.apply(self.image, records, self.epoch)
        together = len(batch) + sum(op.size for op in ops) <= ZNODE_BYTES
        results = self._commit_batch(batch, ops if together else [])
        if results is None:  # a write of the view failed, and the whole multi-op with it: the batch alone
            self._commit_batch(batch, [])
        self._image_stale = False
        # The batch is committed: from here on a failure only leaves the view to be written whole again.
        if results is None or self._view_stale:
            self._sync_view()
        elif together:
            self.view.committed(ops, results)
        else:
            try:
                self._write_view(ops)
            except KazooException:
                self._view_stale = True

    def _commit_batch(self, batch: bytes, ops: list[Op]) -> list[Any] | None:
        """One multi-op: the controller epoch's check, the batch, and `ops` (the view's writes, where they fit).
        Returns the results of `ops`, or None if one of them failed (then nothing was written)."""
        transaction = self.client.transaction()
        transaction.check(self._path(CONTROLLER_EPOCH), self._epoch_version)
        transaction.create(self._path(f"{LOG}/{BATCH_PREFIX}"), batch, sequence=True)
        for op in ops:
            op.add_to(transaction)
        try:
            results = transaction.commit()
        except SessionExpiredError:  # the claim went with the session: another controller may be elected now
            self._epoch_version = -1
            raise NotController(f"the session of controller epoch {self.epoch} expired") from None
        if isinstance(results[0], BadVersionError | NoNodeError):  # the epoch check itself failed
            self._epoch_version = -1
            raise NotController(f"controller epoch {self.epoch} is over: another controller was elected")
        failed = [i for i, result in enumerate(results)
                  if isinstance(result, KazooException) and not isinstance(result, RolledBackError)]
        if failed and failed[0] >= 2:
            return None
        if failed:
            raise results[failed[0]]
        self._last_batch = results[1].rpartition("/")[2]
        return results[2:]

    def _write_view(self, ops: list[Op]) -> None:
        """The batch is in the log: the view's writes follow in multi-ops under ZooKeeper's request limit, each
        fenced like the append."""
        start = 0
        while start < len(ops):
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
                self._sync_view()
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

"""`ZooKeeperQuorum`: one controller process's part among several sharing a ZooKeeper store (issue 13).

A process is a standby (it follows the metadata log and answers NOT_CONTROLLER) or the active controller (it
decides and commits). The store (store/zookeeper.py) does the ZooKeeper side: the claim at `/controller`, the
controller epoch that fences every append, the log.

Rules:
- Every store call runs in one executor thread, in order; kazoo's watch callbacks only wake the loop
  (`call_soon_threadsafe`). Controller state is touched on the loop only.
- Standby: on each wake (a batch appended, the claim changed) and at least every FOLLOW_S, it reads the new
  batches into its controller; when `/controller` is free it runs for election, and wins with the whole log
  (`store.elect` catches up after the epoch moved, so nothing the predecessor committed is missed).
- Active: the controller is `deferred`: its decisions apply at once and the committer appends whatever is
  uncommitted as one batch (many requests' records in one ZooKeeper multi-op), then marks it committed;
  answers wait for that (`until_committed`), as Kafka's QuorumController answers after its commit.
- Lease: the active controller acts only while the confirmation of its epoch is recent: each append and each
  `confirm` (every quarter session, and at once when the lease ran out) renews it, counted from when the call
  was sent, for LEASE_FRACTION of the ZooKeeper session. ZooKeeper expires the session (and the claim) only a
  whole session after it last heard from it, so a controller cut off from ZooKeeper, or paused, stops acting
  before anyone else can be elected: it needs no word from kazoo (which reports an expiry only once the
  connection heals). kazoo's word that the connection is lost ends the lease at once too: ZooKeeper may grant
  a shorter session than asked (it clamps it to its min/max session timeouts) and kazoo, which times its
  connection by the granted one, notices in two thirds of it.
- A failed append or confirm (another controller was elected, the session expired, the connection lost with an
  append in flight whose fate is unknown; a confirm that only lost its connection is asked again) steps down:
  uncommitted records are reverted, waiting answers get NOT_CONTROLLER, the claim is released if this session
  still holds it, and the process follows again. A successor reads the truth from ZooKeeper; this process's
  state is the committed log's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kazoo.exceptions import ConnectionLoss, KazooException

from epoch_broker.broker import events
from epoch_broker.broker.controller.controller import Controller
from epoch_broker.broker.controller.store import NotController
from epoch_broker.broker.controller.store.zookeeper import ZooKeeperMetadataStore

log = logging.getLogger(__name__)

FOLLOW_S = 1.0  # a standby reads the log at least this often, watch or not
LEASE_FRACTION = 2 / 3  # of the ZooKeeper session: how long a confirmation lets the controller act
CONFIRM_FRACTION = 1 / 4  # of the ZooKeeper session: how often an idle active controller confirms its epoch
RETRY_S = 0.2  # after a ZooKeeper call failed on a standby (the connection is down)

T = TypeVar("T")


class ZooKeeperQuorum:
    def __init__(self, controller: Controller, store: ZooKeeperMetadataStore, node_id: int,
                 session_timeout_ms: int, on_revert: Callable[[], None]) -> None:
        self.controller = controller
        self.store = store
        self.node_id = node_id
        self.on_revert = on_revert  # the process restores what the reverted image lost (its configured users)
        self.lease_s = session_timeout_ms / 1000 * LEASE_FRACTION
        self.confirm_s = session_timeout_ms / 1000 * CONFIRM_FRACTION
        self.active = False
        self.controller_epoch = -1  # while active
        self._lease_until = 0.0  # loop time
        self._confirmed_at = 0.0  # loop time the last confirmation was sent
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"zookeeper-{node_id}")
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []  # (offset, resolved True once committed)
        self._task: asyncio.Task | None = None
        self._unreachable = False  # a standby's last read of ZooKeeper failed (logged once)
        controller.deferred = True
        controller.active = False
        controller.on_uncommitted = self._wake.set

    @property
    def acting(self) -> bool:
        """Active, and within its lease: may decide and answer."""
        return self.active and asyncio.get_running_loop().time() < self._lease_until

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def start(self) -> None:
        """Follow the log and run for election, in the background from now on."""
        loop = asyncio.get_running_loop()
        await self._call(self.store.watch, lambda: loop.call_soon_threadsafe(self._wake.set),
                         lambda: loop.call_soon_threadsafe(self._disconnected))
        self._task = asyncio.create_task(self._run())

    def _disconnected(self) -> None:
        """kazoo lost the connection: stop acting now (a confirmation on the healed connection acts again)."""
        if self.active and self._lease_until > 0:
            log.warning("controller %d lost its connection to ZooKeeper: not acting until it confirms its epoch",
                        self.node_id)
        self._lease_until = 0.0
        self._wake.set()

    async def until_committed(self, offset: int) -> bool:
        """Wait until the log is committed up to `offset`; False if leadership was lost first."""
        if self.controller.committed_offset >= offset:
            return True
        if not self.active:
            return False
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        return await future

    async def wait_for_change(self, timeout_s: float) -> None:
        """Return after the next wake (a follow, a commit, a claim change) or `timeout_s`."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout_s)

    async def _run(self) -> None:
        while True:
            try:
                if self.active:
                    await self._act_once()
                else:
                    await self._stand_by_once()
            except (NotController, KazooException) as exc:
                if self.active:
                    await self._step_down(str(exc) or type(exc).__name__)
                else:  # ZooKeeper unreachable: said once, retried quietly
                    if not self._unreachable:
                        log.warning("controller %d cannot follow the log in ZooKeeper (%s): retrying",
                                    self.node_id, str(exc) or type(exc).__name__)
                    self._unreachable = True
                    await self._sleep(RETRY_S)
            except Exception:  # a bug must not leave a controller acting on state it cannot commit
                log.exception("controller %d: the quorum loop failed", self.node_id)
                if self.active:
                    await self._step_down("an internal error")
                await self._sleep(RETRY_S)

    async def _sleep(self, timeout_s: float) -> None:
        await self.wait_for_change(timeout_s)
        self._wake.clear()

    # -- standby ------------------------------------------------------------------------------------

    async def _stand_by_once(self) -> None:
        self.controller.follow(await self._call(self.store.follow))
        if self._unreachable:
            self._unreachable = False
            log.info("controller %d follows the log in ZooKeeper again", self.node_id)
        holder = await self._call(self.store.controller_id)
        if holder == self.node_id:  # a claim left by this process's own earlier term
            await self._call(self.store.resign)
        if holder in (-1, self.node_id):
            sent = asyncio.get_running_loop().time()
            try:
                records = await self._call(self.store.elect, self.node_id)
            except NotController:
                pass
            else:
                self.controller.follow(records)
                self._become_active(sent)
                return
        self.controller.image.controller_id = holder
        await self._sleep(FOLLOW_S)

    def _become_active(self, sent: float) -> None:
        self.active = self.controller.active = True
        self.controller_epoch = self.controller.controller_epoch = self.store.epoch
        self._lease_until = sent + self.lease_s
        self._confirmed_at = sent
        self.controller.image.controller_id = self.node_id
        log.warning("controller %d is active: controller epoch %d, metadata log at offset %d", self.node_id,
                    self.controller_epoch, self.controller.committed_offset - 1)
        events.emit("controller", controller_epoch=self.controller_epoch)
        self.controller.activate()
        self._wake.set()

    # -- active -------------------------------------------------------------------------------------

    async def _act_once(self) -> None:
        loop = asyncio.get_running_loop()
        pending = self.controller.uncommitted()
        if pending:
            sent = loop.time()
            await self._call(self.store.append, pending)
            self._renew(sent)
            self.controller.mark_committed(self.controller.committed_offset + len(pending))
            self._release_waiters()
            return
        if loop.time() - self._confirmed_at >= self.confirm_s or loop.time() >= self._lease_until:
            sent = loop.time()
            try:
                await self._call(self.store.confirm)
            except ConnectionLoss:  # it wrote nothing: not acting (the lease runs out), asked again, the session
                await self._sleep(RETRY_S)  # may yet live; an expiry or another's election is NotController
                return
            self._renew(sent)
            return
        await self._sleep(self._confirmed_at + self.confirm_s - loop.time())

    def _renew(self, sent: float) -> None:
        self._confirmed_at = sent
        self._lease_until = max(self._lease_until, sent + self.lease_s)

    def _release_waiters(self) -> None:
        committed = self.controller.committed_offset
        waiting = []
        for offset, future in self._waiters:
            if offset <= committed:
                if not future.done():
                    future.set_result(True)
            else:
                waiting.append((offset, future))
        self._waiters = waiting

    async def _step_down(self, why: str) -> None:
        self.active = self.controller.active = False
        self.controller.controller_epoch = None
        self._lease_until = 0.0
        lost = len(self.controller.uncommitted())
        self.controller.revert()
        self.on_revert()
        for _, future in self._waiters:
            if not future.done():
                future.set_result(False)
        self._waiters = []
        log.warning("controller %d steps down from controller epoch %d (%s); %d uncommitted records dropped",
                    self.node_id, self.controller_epoch, why, lost)
        events.emit("resign", controller_epoch=self.controller_epoch, why=why)
        with contextlib.suppress(KazooException):
            await self._call(self.store.resign)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for _, future in self._waiters:
            if not future.done():
                future.set_result(False)
        self._executor.shutdown(wait=True)

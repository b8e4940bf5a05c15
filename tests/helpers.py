"""Start a real broker process for a test: `start_broker(tmp_path, overrides, node_id) -> BrokerProcess`.

The process harness is the one users get (epoch_broker/testing.py's BrokerProcess, free_port); this adds only
what the project's own tests share: the waits, and `chromium` (Debian's headless Chromium, for the pages the
project renders: the drill report, the status page).

Waits: a test never sleeps a fixed time and hopes; it waits for the condition it asserts next.
- `wait_for` (async) and its blocking twin `wait_for_sync`: poll `predicate` until it returns something truthy
  and return that; past `timeout` an AssertionError names `what` and the last value seen.
- `not_yet(detail)`: a falsy value for a predicate to return while its condition does not hold, whose repr is
  `detail` (how far it got), so a timeout says more than "last: False".
- `holds` (async) and `holds_sync`: the other half, for "nothing more may happen": `predicate` stays truthy for
  the whole `window`, checked every `interval`; the first falsy value fails, naming `what` and that value. The
  only place a test lets time pass on purpose.
(The test kit's `epoch_broker.testing.wait_until` is the users' one, raising TimeoutError; the project's tests
use these, whose failure shows the last value.)
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from epoch_broker.drill import launcher
from epoch_broker.testing import LISTEN_PORTS, BrokerProcess, free_port

__all__ = ["ARTIFACTS", "REPO", "BrokerProcess", "chromium", "free_base_port", "free_port", "holds", "holds_sync",
           "not_yet", "start_broker", "wait_for", "wait_for_sync"]

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "build" / "test-artifacts"  # screenshots kept for a look after the run
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium once (its profile in `profile`) with `args`: a page's URL and what to do with it
    (`--screenshot=FILE`, `--dump-dom`)."""
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is needed (make test and .ci/run install it)"
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


def free_base_port(brokers: int) -> int:
    """A base port for a cluster's brokers (base+i) and controller, below the kernel's ephemeral range (as
    free_port: no client's outgoing connection can take one meanwhile)."""
    return launcher.free_base_port(brokers, LISTEN_PORTS)


def start_broker(tmp_path: Path, overrides: dict[str, str] | None = None, node_id: int = 0,
                 open_files_limit: int | None = None) -> BrokerProcess:
    return BrokerProcess(tmp_path, overrides or {}, node_id, open_files_limit).start()


T = TypeVar("T")


class NotYet:
    """Falsy, shown as its detail: what a predicate returns while its condition does not hold yet."""

    def __init__(self, detail: object) -> None:
        self.detail = detail

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return str(self.detail)


def not_yet(detail: object) -> NotYet:
    return NotYet(detail)


def _not_reached(what: str, timeout: float, value: object) -> AssertionError:
    return AssertionError(f"{what} not reached within {timeout} s (last: {value!r})")


def _broken(what: str, window: float, elapsed: float, value: object) -> AssertionError:
    return AssertionError(f"{what} did not hold for {window} s: broken after {elapsed:.2f} s (value: {value!r})")


async def wait_for(predicate: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.05,
                   what: str = "condition") -> T:
    """Poll `predicate` (plain or async) until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise _not_reached(what, timeout, value)
        await asyncio.sleep(interval)


def wait_for_sync(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
                  what: str = "condition") -> T:
    """`wait_for` for blocking code (a client with a blocking API, a process): the same rules."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _not_reached(what, timeout, value)
        time.sleep(interval)


async def holds(predicate: Callable[[], object | Awaitable[object]], window: float, interval: float = 0.05,
                what: str = "condition") -> None:
    """`predicate` (plain or async) stays truthy for `window` seconds, checked at the start, every `interval`
    and at the end."""
    start = time.monotonic()
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        elapsed = time.monotonic() - start
        if not value:
            raise _broken(what, window, elapsed, value)
        if elapsed >= window:
            return
        await asyncio.sleep(min(interval, window - elapsed))


def holds_sync(predicate: Callable[[], object], window: float, interval: float = 0.05,
               what: str = "condition") -> None:
    """`holds` for blocking code: the same rules."""
    start = time.monotonic()
    while True:
        value = predicate()
        elapsed = time.monotonic() - start
        if not value:
            raise _broken(what, window, elapsed, value)
        if elapsed >= window:
            return
        time.sleep(min(interval, window - elapsed))

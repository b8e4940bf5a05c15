"""Run a coroutine at once, up to its first real wait, and make a task only if it has one (Python 3.12's eager
tasks, for the 3.11 this broker also runs on).

Why: most requests never wait (a Metadata, a Produce with acks=1, an offset commit on a broker with no follower,
a Fetch with data ready). As a task, each costs a task object, a trip round the event loop to start it and one
more for its done callback: on a commit that was half the broker's time. Started eagerly, the request is
answered in the callback that read it.

Rules:
- `start_eagerly(coro)` runs `coro` to its first suspension in the caller's frame (and context). Finished by
  then: it returns a done future holding the result, the exception or the cancellation, read at once with
  `done()` and `result()`, no loop trip. Suspended: the rest runs in a task, exactly as `yield from` would go
  on (sends, throws and cancellation pass through), so callers await or cancel what they get back either way.
- Whatever the coroutine does before its first wait happens before `start_eagerly` returns: callers that relied
  on a task starting later must not use it.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[T]:
    """`coro` run up to its first wait: a done future if it never waits, else the task that goes on with it.
    `loop`: the running loop, if the caller has it (asking costs a getpid() syscall on Python 3.11)."""
    try:
        pending = coro.send(None)
    except StopIteration as finished:
        done: asyncio.Future[T] = (loop or asyncio.get_running_loop()).create_future()
        done.set_result(finished.value)
        return done
    except asyncio.CancelledError:
        cancelled: asyncio.Future[T] = (loop or asyncio.get_running_loop()).create_future()
        cancelled.cancel()
        return cancelled
    except Exception as exc:  # handed to the caller through the future, as a task would (SystemExit is not)
        failed: asyncio.Future[T] = (loop or asyncio.get_running_loop()).create_future()
        failed.set_exception(exc)
        return failed
    return (loop or asyncio.get_running_loop()).create_task(_go_on(coro, pending))


@types.coroutine
def _go_on(coro: Coroutine[Any, Any, T], pending: Any) -> Generator[Any, Any, T]:
    """`yield from coro` for a coroutine that already yielded `pending` (the future it waits on)."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation and throws go on to the coroutine, as with yield from
            try:
                pending = coro.throw(exc)
            except StopIteration as finished:
                return finished.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as finished:
                return finished.value

"""broker/eager.py: a coroutine started eagerly behaves as the same coroutine in a task (result, exception,
cancellation, values sent back from what it awaits), runs up to its first wait before `start_eagerly` returns,
and costs no task when it never waits."""

from __future__ import annotations

import asyncio

import pytest

from epoch_broker.broker.eager import start_eagerly


async def test_a_coroutine_that_never_waits_is_done_on_return_without_a_task() -> None:
    steps: list[str] = []

    async def answer() -> int:
        steps.append("ran")
        return 42

    tasks_before = len(asyncio.all_tasks())
    done = start_eagerly(answer())
    assert steps == ["ran"] and done.done() and done.result() == 42
    assert len(asyncio.all_tasks()) == tasks_before
    assert await done == 42


async def test_an_exception_before_the_first_wait_is_in_the_returned_future() -> None:
    async def refuse() -> None:
        raise ValueError("refused")

    failed = start_eagerly(refuse())
    assert failed.done()
    with pytest.raises(ValueError, match="refused"):
        failed.result()


async def test_what_comes_before_the_first_wait_runs_at_once_the_rest_in_a_task() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[str] = loop.create_future()
    steps: list[str] = []

    async def two_halves() -> str:
        steps.append("before")
        got = await gate  # the value the future resolves with comes back through the task
        steps.append(f"after {got}")
        await asyncio.sleep(0)  # a bare yield to the loop is passed through too
        return got.upper()

    started = start_eagerly(two_halves(), loop)
    assert steps == ["before"] and not started.done()
    assert isinstance(started, asyncio.Task)
    gate.set_result("opened")
    assert await asyncio.wait_for(started, 10) == "OPENED"
    assert steps == ["before", "after opened"]


async def test_cancelling_the_task_cancels_the_awaited_future_and_runs_the_coroutines_cleanup() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    cleaned: list[str] = []

    async def waits_forever() -> None:
        try:
            await gate
        finally:
            cleaned.append("finally")

    started = start_eagerly(waits_forever())
    await asyncio.sleep(0)
    started.cancel()
    with pytest.raises(asyncio.CancelledError):
        await started
    assert gate.cancelled() and cleaned == ["finally"]


async def test_a_failure_of_what_it_awaits_is_thrown_into_the_coroutine_which_may_handle_it() -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[int] = loop.create_future()

    async def recovers() -> str:
        try:
            await gate
        except KeyError as exc:
            return f"handled {exc.args[0]}"
        return "not reached"

    started = start_eagerly(recovers())
    gate.set_exception(KeyError("lost"))
    assert await asyncio.wait_for(started, 10) == "handled lost"


async def test_a_coroutine_that_cancels_itself_before_waiting_gives_a_cancelled_future() -> None:
    async def gives_up() -> None:
        raise asyncio.CancelledError

    assert start_eagerly(gives_up()).cancelled()

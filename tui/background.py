"""Run engine calls off the event loop in daemon threads, awaited by async Textual workers.

Textual's thread workers run on the loop's default executor, whose threads Python joins at
exit: quitting while a 10 M-sample fit computes would leave the user at a blank terminal
until it ends. A daemon thread is abandoned instead, and an async worker awaiting it can be
cancelled (a newer edit supersedes an older fit) without waiting for the computation.
Only read-only work goes here; exports, which write files, stay ordinary thread workers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the awaiting worker was cancelled meanwhile
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


def in_background(fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Start ``fn(*args, **kwargs)`` in a daemon thread; await the returned future."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the awaiting coroutine, raised there
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, fut, None, exc)
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(_settle, fut, result, None)

    threading.Thread(target=target, name=f"pt2pt-{getattr(fn, '__name__', 'work')}",
                     daemon=True).start()
    return fut

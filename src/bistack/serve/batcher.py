"""Micro-batching: concurrent requests share one forward pass.

Each request's texts join a queue. One worker takes the first waiting request, then keeps
taking requests with the same options (others wait, in order, for a batch of their own) for up
to ``window`` seconds or until ``max_texts`` texts are gathered, runs them through the model in
one call (in a thread, so the server keeps accepting requests), and hands each request its own
slice of the results. A request is never split, and under no load a lone request waits at most
``window``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

Run = Callable[[Sequence[str], dict[str, Any]], list[Any]]


@dataclass
class Pending:
    texts: list[str]
    options: dict[str, Any]
    key: tuple[tuple[str, Any], ...]
    done: asyncio.Future[list[Any]] = field(repr=False)


class MicroBatcher:
    """Group concurrent ``submit`` calls into calls of ``run(texts, options)``."""

    def __init__(self, run: Run, window: float = 0.005, max_texts: int = 64) -> None:
        self.run = run
        self.window = window
        self.max_texts = max_texts
        # One thread runs the model, always the same one: torch's intra-op thread pool belongs
        # to the thread that calls it, and a pool per calling thread oversubscribes the cores.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bistack-model")
        self.queue: asyncio.Queue[Pending] | None = None
        self.worker: asyncio.Task[None] | None = None
        self.batches = 0  # forward passes run, for /health and the benchmark
        self.texts = 0

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self.worker = asyncio.create_task(self._work())

    async def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, texts: list[str], options: dict[str, Any]) -> list[Any]:
        """The model's results for ``texts``, computed in a batch with other requests."""
        assert self.queue is not None, "start() the batcher first"
        done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        key = tuple(sorted(options.items()))
        await self.queue.put(Pending(texts, options, key, done))
        return await done

    async def _work(self) -> None:
        assert self.queue is not None
        backlog: list[Pending] = []  # requests with other options than the batch being made
        while True:
            first = backlog.pop(0) if backlog else await self.queue.get()
            group, count = [first], len(first.texts)
            for pending in list(backlog):
                if pending.key == first.key and count < self.max_texts:
                    backlog.remove(pending)
                    group.append(pending)
                    count += len(pending.texts)
            deadline = time.monotonic() + self.window
            while count < self.max_texts:
                remaining = deadline - time.monotonic()
                try:
                    if remaining > 0:
                        item = await asyncio.wait_for(self.queue.get(), remaining)
                    else:
                        item = self.queue.get_nowait()
                except (TimeoutError, asyncio.QueueEmpty):
                    break
                if item.key == first.key:
                    group.append(item)
                    count += len(item.texts)
                else:
                    backlog.append(item)
            await self._run(group)

    async def _run(self, group: list[Pending]) -> None:
        texts = [text for pending in group for text in pending.texts]
        try:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(self.executor, self.run, texts, group[0].options)
        except Exception as error:  # the callers report it; the worker carries on
            if len(group) > 1:  # one request's texts must not fail the others: run each alone
                for pending in group:
                    await self._run([pending])
                return
            if not group[0].done.done():
                group[0].done.set_exception(error)
            return
        self.batches += 1
        self.texts += len(texts)
        start = 0
        for pending in group:
            end = start + len(pending.texts)
            if not pending.done.done():  # a caller that went away has cancelled its future
                pending.done.set_result(results[start:end])
            start = end

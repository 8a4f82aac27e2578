"""Continuous batching: concurrent requests share one forward pass, and none waits for company.

Each request's texts join a queue. One worker runs the model: when it is idle, the first
request to arrive runs at once, alone; requests that arrive while a pass runs wait, and when
the pass ends every one of them that fits (same options as the oldest waiting request, up to
``max_texts`` texts in all) forms the next pass, as inference servers batch. The oldest waiting
request always leads the next pass, so none is starved; a request is never split (one larger
than ``max_texts`` runs alone), and options never mix in a pass. The pass runs in a thread, so
the server keeps accepting requests, and each request gets its own slice of the results; a
pass that fails is rerun request by request, so one bad request fails only itself.
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


class ContinuousBatcher:
    """Group concurrent ``submit`` calls into calls of ``run(texts, options)``. For the
    server's metrics, ``on_pass`` hears the texts and the seconds of every pass run (timed on
    the model's thread: the model's own time, without the hand-over) and ``on_depth`` the
    requests waiting whenever that changes."""

    def __init__(
        self,
        run: Run,
        max_texts: int = 64,
        on_pass: Callable[[int, float], None] = lambda texts, seconds: None,
        on_depth: Callable[[int], None] = lambda waiting: None,
    ) -> None:
        self.run = run
        self.max_texts = max_texts
        self.on_pass = on_pass
        self.on_depth = on_depth
        # One thread runs the model, always the same one: torch's intra-op thread pool belongs
        # to the thread that calls it, and a pool per calling thread oversubscribes the cores.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bistack-model")
        self.queue: asyncio.Queue[Pending] | None = None
        self.waiting: list[Pending] = []  # taken off the queue, not yet in a pass
        self.worker: asyncio.Task[None] | None = None
        self.batches = 0  # forward passes run, for /health and the benchmark
        self.texts = 0
        self.running = 0  # texts in the pass running now

    @property
    def depth(self) -> int:
        """Requests waiting for a pass (the one running excluded)."""
        return len(self.waiting) + (self.queue.qsize() if self.queue is not None else 0)

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self.worker = asyncio.create_task(self._work())

    async def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, texts: list[str], options: dict[str, Any]) -> list[Any]:
        """The model's results for ``texts``, computed in a pass with other requests."""
        assert self.queue is not None, "start() the batcher first"
        done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        key = tuple(sorted(options.items()))
        await self.queue.put(Pending(texts, options, key, done))
        self.on_depth(self.depth)
        return await done

    async def call(self, function: Callable[[], Any]) -> Any:
        """``function()`` run on the model's thread, between passes (the warm-up, sampling)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function)

    async def _work(self) -> None:
        assert self.queue is not None
        while True:
            if not self.waiting:
                self.waiting.append(await self.queue.get())  # idle: the first one runs at once
            while not self.queue.empty():  # all that came while the last pass ran
                self.waiting.append(self.queue.get_nowait())
            group = self._next_pass()
            self.on_depth(self.depth)
            if group:
                await self._run(group)

    def _next_pass(self) -> list[Pending]:
        """The oldest waiting request and, in order, the others with its options that fit."""
        self.waiting = [p for p in self.waiting if not p.done.done()]  # callers that went away
        if not self.waiting:
            return []
        first = self.waiting[0]
        group, count, rest = [first], len(first.texts), []
        for pending in self.waiting[1:]:
            if pending.key == first.key and count + len(pending.texts) <= self.max_texts:
                group.append(pending)
                count += len(pending.texts)
            else:
                rest.append(pending)
        self.waiting = rest
        return group

    async def _run(self, group: list[Pending]) -> None:
        texts = [text for pending in group for text in pending.texts]
        self.running = len(texts)
        try:
            loop = asyncio.get_running_loop()
            results, seconds = await loop.run_in_executor(
                self.executor, self._timed, texts, group[0].options
            )
        except Exception as error:  # the callers report it; the worker carries on
            if len(group) > 1:  # one request's texts must not fail the others: run each alone
                for pending in group:
                    await self._run([pending])
                return
            if not group[0].done.done():
                group[0].done.set_exception(error)
            return
        finally:
            self.running = 0
        self.batches += 1
        self.texts += len(texts)
        self.on_pass(len(texts), seconds)
        start = 0
        for pending in group:
            end = start + len(pending.texts)
            if not pending.done.done():  # a caller that went away has cancelled its future
                pending.done.set_result(results[start:end])
            start = end

    def _timed(self, texts: Sequence[str], options: dict[str, Any]) -> tuple[list[Any], float]:
        """On the model's thread: ``run``'s results and the seconds it took."""
        started = time.perf_counter()
        results = self.run(texts, options)
        return results, time.perf_counter() - started

"""Host work ahead of the device: the next items of an iterator made in a background thread
while the caller works on the current one (:func:`overlapped`: where the work runs on an
accelerator; on a CPU the thread would take cores from the computation itself, and measured on
this project's 2-core machine it made a tagger's epoch ~15% and its prediction ~10% slower).

Prediction reads batches this way (the next batch's encoding, collation and network pass run
while the caller decodes the current one's tags on the host), and training collates the next
batch and copies it from pinned memory (:mod:`bistack.transfer`) while the device runs
the current step. Collation holds the interpreter's lock only between tensor calls, and
PyTorch, onnxruntime and the decoding kernels release it, so the two threads overlap. Items
come in order; an error raised making one is raised where the caller would have met it; a
caller that stops early stops the thread. The thread runs in the caller's context (its context
variables, such as :func:`~bistack.models.spelling_cache.each_batch_alone`, and PyTorch's
gradient and inference modes, autocast and CUDA stream), so an item is made as the caller would
make it.
"""

from __future__ import annotations

import contextvars
import queue
import sys
import threading
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, ExitStack
from typing import Any, TypeVar

T = TypeVar("T")


class _End:
    """What the thread puts after the last item (``error``: what ended it, if anything)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


def overlapped(
    items: Iterable[T], device: Any, depth: int = 1, several: bool = True
) -> Generator[T, None, None]:
    """``items``, made ahead (:func:`ahead`) where ``device`` (a torch device, or its name) is
    an accelerator and there are ``several`` (a single batch, such as a one-sentence
    prediction, has nothing to overlap with: starting a thread for it costs ~120 µs), else one
    by one as the caller reads them."""
    if several and beside_the_host(device):
        return ahead(items, depth)
    return (item for item in items)


def beside_the_host(device: Any) -> bool:
    """Whether ``device`` computes apart from the host's CPU cores (a GPU)."""
    return str(device).partition(":")[0] != "cpu"


def ahead(items: Iterable[T], depth: int = 1) -> Generator[T, None, None]:
    """``items`` in order, up to ``depth`` of them made ahead in a background thread. The
    iterator runs wholly in that thread (a context it enters, like ``torch.no_grad``, holds
    there, where its items are made)."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    made: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        """Hand ``item`` over; False once the caller has stopped reading."""
        while not stop.is_set():
            try:
                made.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    modes = torch_modes()

    def produce() -> None:
        source = iter(items)
        try:
            with modes():
                for item in source:
                    if not put(item):
                        return
        except BaseException as error:  # raised to the caller, where it reads this item
            put(_End(error))
            return
        finally:
            close = getattr(source, "close", None)
            if close is not None and stop.is_set():
                close()  # a generator left early runs its own clean-up here
        put(_End())

    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(produce,), name="bistack-ahead", daemon=True
    )
    thread.start()
    try:
        while True:
            item = made.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        stop.set()
        thread.join()


# The device types whose autocast a caller may have on (``torch.autocast``'s names).
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def torch_modes() -> Callable[[], AbstractContextManager[Any]]:
    """The caller's gradient and inference modes, its autocast (mixed precision) of each device
    type and its CUDA stream, read here, to enter in another thread (they are each thread's
    own: a network pass made ahead would otherwise run in float32 under ``--precision
    bf16-mixed``, on the default stream); nothing where torch is not in use (an exported
    model's runtime)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ExitStack
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()
    cached = torch.is_autocast_cache_enabled()
    casts = [
        (kind, torch.get_autocast_dtype(kind))
        for kind in AUTOCAST_DEVICES
        if torch.is_autocast_enabled(kind)
    ]
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    stream = torch.cuda.current_stream() if cuda else None

    def enter() -> AbstractContextManager[Any]:
        stack = ExitStack()
        stack.enter_context(torch.inference_mode(inference))
        stack.enter_context(torch.set_grad_enabled(grad))
        for kind, dtype in casts:
            stack.enter_context(torch.autocast(kind, dtype=dtype, cache_enabled=cached))
        if stream is not None:
            stack.enter_context(torch.cuda.stream(stream))
        return stack

    return enter

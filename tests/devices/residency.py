"""A GPU's waits seen on a CPU: tensors marked as living on the device, and every read of one
(and every blocking copy onto it) counted with the line that made it.

On a CPU a read of "device" memory costs nothing and often dispatches nothing (``.cpu()`` of a
CPU tensor returns it), so a profiler cannot see what would make a GPU's host wait. Here the
parameters, buffers and gradients of a model, and each batch once copied to its device, are
marked; a function mode marks whatever a torch function makes from a marked tensor, and counts:

- a **read**: ``.cpu()``, ``.to("cpu")`` or ``.to(torch.device("cpu"))`` (or a name bound to
  such a device, ``.to(HOST)``), ``.item()``,
  ``.tolist()``, ``.numpy()``, ``bool()``/``int()``/``float()``/``index()``, ``np.asarray``,
  ``nonzero``, one-argument ``torch.where``, ``bincount``, ``equal``, ``masked_select``,
  ``unique``, ``one_hot`` without ``num_classes`` (it reads the largest class), indexing or
  assigning by a boolean mask, ``copy_`` into a host tensor, or packing a sequence by lengths
  on the device;
- a **blocking copy**: host memory copied onto the device without ``non_blocking`` (``.to``
  with a device, ``torch.tensor``/``as_tensor`` given a device, ``new_tensor`` of a device
  tensor, ``copy_`` from a host tensor, and the implicit copy of a host index tensor, or of a
  Python list used as an index, that indexes a device one); the batches' own
  copies (:func:`bistack.transfer.to_device`, pinned and non-blocking) are the sanctioned
  ones.

Inside a backward pass the autograd engine runs no function mode, so bistack's own autograd
Functions (the CRF's scan) have their ``backward`` entered into the mode too, their incoming
gradients marked, and so do the gradient hooks registered (``Tensor.register_hook``) while
the counter runs.

A device here is whatever a ``device`` argument names but the string ``"cpu"``: on this CPU, a
tensor made ``device=emissions.device`` is one a GPU run would make on the GPU, and one made
``device="cpu"`` is meant for the host.
"""

from __future__ import annotations

import collections
import linecache
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

MARK = "_bistack_test_on_device"
READS = {
    "cpu",
    "item",
    "tolist",
    "numpy",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__array__",
    "nonzero",
    "argwhere",
    "equal",
    "masked_select",
    "unique",
    "unique_consecutive",
    "bincount",
}
# Indexing a device tensor by a host index tensor copies the index onto the device first.
INDEXED_BY = {
    "__getitem__",
    "__setitem__",
    "index_select",
    "gather",
    "take",
    "index_put_",
    "index_add",
    "index_add_",
    "index_copy",
    "index_copy_",
    "scatter",
    "scatter_",
}
COPIES_TO = {"to", "cuda"}
MADE_ON_DEVICE_FROM_HOST = {"new_tensor"}  # a device tensor's method given host data
MADE_FROM_HOST = {"tensor", "as_tensor", "asarray"}
SOURCE = Path(__file__).resolve().parents[2] / "src" / "bistack"


def mark(tensor: Any) -> Any:
    if isinstance(tensor, Tensor):
        setattr(tensor, MARK, True)
    return tensor


def marked(value: Any) -> bool:
    return isinstance(value, Tensor) and getattr(value, MARK, False)


def where() -> str:
    """The innermost line of bistack (or of torch's packing helpers) that led here (each
    frame's path resolved as :data:`SOURCE` is, so that a checkout reached through a symbolic
    link is still bistack's)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(SOURCE) or path.name == "rnn.py":
            return f"{path.name}:{frame.lineno} {frame.line}"
    return "elsewhere"


def spelled_host(value: Any) -> bool:
    """Whether a ``to`` names the host: the string ``"cpu"``, or a ``torch.device`` where the
    line that made the call spells ``cpu`` (``torch.device("cpu")``); a device object read off
    a tensor (``x.device``, which is ``cpu`` on this CPU) stands for the device."""
    if isinstance(value, str):
        return value == "cpu"
    if not isinstance(value, torch.device) or value.type != "cpu":
        return False
    frame = calling_frame()
    if frame is None:
        return False
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)
    bound = {**frame.f_globals, **frame.f_locals}
    constant = any(
        isinstance(bound.get(name), torch.device) and bound[name].type == "cpu" for name in names
    )  # a name bound to the host device (``HOST = torch.device("cpu")``), not ``x.device``
    return "cpu" in line or constant


def calling_frame() -> Any:
    """The frame that made the torch call being counted (the innermost outside torch and this
    module)."""
    here, library = Path(__file__).resolve(), Path(torch.__file__).parent
    frame = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        if path != here and not path.is_relative_to(library):
            return frame
        frame = frame.f_back
    return None


def names_a_device(args: tuple, kwargs: dict) -> bool:
    device = kwargs.get("device")
    if device is None:
        device = next((a for a in args[1:] if isinstance(a, torch.device | str)), None)
    return device is not None and not (isinstance(device, str) and device == "cpu")


class DeviceResidency(TorchFunctionMode):
    """Marks what marked tensors make; counts reads of them and blocking copies onto the
    device (``reads``, ``copies``: by the line that made each)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: collections.Counter[str] = collections.Counter()
        self.copies: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs, _ = tree_flatten((args, kwargs))
        from_device = any(marked(value) for value in inputs)
        reads = from_device and self.reads_device(name, args, kwargs)
        if reads:
            self.reads[f"{name} at {where()}"] += 1
        result = func(*args, **kwargs)
        if reads and isinstance(result, Tensor) and marked(result):  # a CPU tensor's .cpu()
            with torch._C.DisableTorchFunction():
                result = result.view_as(result)  # is itself: on the host, it is another
        if self.copies_onto_device(name, args, kwargs, from_device):
            self.copies[f"{name} at {where()}"] += 1
        if (from_device and not reads) or names_a_device(args, kwargs):  # a read lands on the host
            for value in tree_flatten(result)[0]:
                mark(value)
        return result

    @staticmethod
    def reads_device(name: str, args: tuple, kwargs: dict) -> bool:
        if name in READS:
            return True
        if name == "where":  # one argument: the indices of the True, a count read first
            return len(args) + len(kwargs) == 1
        if name == "copy_":  # a device tensor copied into a host one
            return len(args) > 1 and marked(args[1]) and not marked(args[0])
        if name == "to":  # to the host by name (a move between devices reads nothing)
            return any(spelled_host(value) for value in (*args[1:2], kwargs.get("device")))
        if name in ("__getitem__", "__setitem__"):  # a boolean mask's count of True
            index, _ = tree_flatten(args[1])
            return any(isinstance(i, Tensor) and i.dtype == torch.bool for i in index)
        if name == "_pack_padded_sequence":  # its lengths must be on the host
            return marked(args[1])
        if name == "one_hot":  # without num_classes it reads the largest class first
            classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
            return classes == -1
        return False

    @staticmethod
    def copies_onto_device(name: str, args: tuple, kwargs: dict, from_device: bool) -> bool:
        if name == "copy_":  # a host tensor copied into a device one
            return (
                len(args) > 1
                and marked(args[0])
                and not marked(args[1])
                and isinstance(args[1], Tensor)
                and not kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
            )
        if name in MADE_ON_DEVICE_FROM_HOST and args and marked(args[0]):
            return True
        if name in INDEXED_BY and args and marked(args[0]):
            indices, _ = tree_flatten((args[1:], kwargs))
            return lists_an_index(args[1:2]) or any(
                isinstance(i, Tensor) and not marked(i) and i.dtype != torch.bool and i.dim() > 0
                for i in indices
            )
        if from_device or not names_a_device(args, kwargs):
            return False
        if name in COPIES_TO:
            return not kwargs.get("non_blocking", False)
        return name in MADE_FROM_HOST


def lists_an_index(index: Any) -> bool:
    """Whether an index holds a Python list (``x[[0, 2]]``, ``x[:, [1]]``): advanced indexing,
    the list made a host tensor and copied onto the device."""
    if isinstance(index, list):
        return True
    return isinstance(index, tuple) and any(lists_an_index(part) for part in index)


def mark_gradient(parameter: Tensor) -> None:
    mark(parameter.grad)


def mark_model(model: nn.Module) -> None:
    """Parameters, buffers, and each gradient as it is accumulated, on the device."""
    for parameter in model.parameters():
        mark(parameter)
        if parameter.requires_grad:
            parameter.register_post_accumulate_grad_hook(mark_gradient)
    for buffer in model.buffers():
        mark(buffer)


@contextmanager
def device_residency(monkeypatch: Any) -> Iterator[DeviceResidency]:
    """A residency mode, entered here and in the threads that make batches ahead, with each
    batch's copy to its device marking what it copies."""
    from bistack import transfer
    from bistack.devices import ahead

    residency = DeviceResidency()
    real_copy, real_modes = transfer.to_device, ahead.torch_modes

    def copied(tensor: Tensor, device: Any) -> Tensor:
        with torch._C.DisableTorchFunction():
            moved = real_copy(tensor, device)
            moved = moved.clone() if moved is tensor else moved
        return mark(moved)

    def modes() -> Any:
        enter = real_modes()

        @contextmanager
        def both() -> Iterator[None]:
            with enter(), residency:
                yield

        return both

    for module in list(sys.modules.values()):
        if getattr(module, "to_device", None) is real_copy:
            monkeypatch.setattr(module, "to_device", copied)
    monkeypatch.setattr(ahead, "torch_modes", modes)
    for function in bistacks_functions():
        monkeypatch.setattr(
            function, "backward", staticmethod(in_mode(function.backward, residency))
        )
    real_hook = torch.Tensor.register_hook

    def hooked(tensor: Tensor, hook: Any) -> Any:  # a gradient hook runs in backward, modeless
        if getattr(hook, MARK, False):  # the mode dispatched the call again: wrapped already
            return real_hook(tensor, hook)

        def counted(grad: Tensor) -> Any:
            mark(grad)
            with residency:
                return hook(grad)

        setattr(counted, MARK, True)
        return real_hook(tensor, counted)

    monkeypatch.setattr(torch.Tensor, "register_hook", hooked)
    with residency:
        yield residency


def bistacks_functions() -> list[type]:
    """bistack's own autograd Functions (their backward runs outside any function mode)."""
    found, todo = [], list(torch.autograd.Function.__subclasses__())
    while todo:
        function = todo.pop()
        todo += function.__subclasses__()
        if function.__module__.startswith("bistack.") and "backward" in vars(function):
            found.append(function)
    return found


def in_mode(backward: Any, residency: DeviceResidency) -> Any:
    """``backward`` run inside ``residency``, the gradients it receives on the device."""

    def wrapped(ctx: Any, *grads: Any) -> Any:
        for grad in grads:
            mark(grad)
        with residency:
            return backward(ctx, *grads)

    return wrapped

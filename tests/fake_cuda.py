"""A CPU machine that behaves like a one-GPU machine, for testing the CUDA path without a GPU.

``FakeCuda`` is a ``TorchFunctionMode``. Tensors created on or moved to ``"cuda"``
are ordinary CPU tensors tagged as CUDA: they report ``device == cuda:0`` and
``is_cuda``, the tag follows them through every op, and an op that mixes a tagged
tensor with an untagged one of one element or more raises ``DeviceMixError``, as
CUDA does (zero-dimensional CPU tensors may mix, as on a GPU). Reading a tagged
tensor on the host (``item``, ``tolist``, ``bool``, ``nonzero``, boolean-mask
indexing, a copy to the CPU) is counted in ``syncs``: each of those makes a real
GPU wait. ``numpy()`` of a tagged tensor raises, as it does on CUDA.

While the mode is active, ``torch.cuda.is_available()`` is true, the CUDA RNG
calls work, ``cuda_ext``'s CUDA kernel families load their CPU builds (same
functions, CPU tensors underneath; outputs tagged), and ``import gsplat`` gives
``tests.gsplat_standin``.

What it cannot catch: kernel-level bugs, numerical differences of the CUDA
kernels, and syncs inside C++ code (none of ours sync).
"""

from __future__ import annotations

import sys
import types
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

_TAG = "_recon4d_fake_cuda"
CUDA0 = torch.device("cuda", 0)

# Reading a value on the host: a GPU run waits for the device at each of these.
_SYNC_METHODS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "nonzero", "masked_select",
                 "unique", "unique_consecutive", "argwhere", "nonzero_static", "__format__", "__repr__"}
# Indexing may take CPU index tensors (PyTorch copies them over); the indexed value may not mix.
_INDEXING = {"__getitem__", "__setitem__"}
# Cross-device copies are legal in PyTorch.
_CROSS_DEVICE = {"copy_", "_has_compatible_shallow_copy_type"}


# What optimisers ask before a step (are we capturing a CUDA graph?).
_IDLE_STREAM = types.SimpleNamespace(is_capturing=lambda: False, synchronize=lambda: None)


class DeviceMixError(RuntimeError):
    """An op mixed a (fake) CUDA tensor with a CPU tensor: it would fail on a real GPU."""


def is_fake_cuda(t: Any) -> bool:
    return isinstance(t, Tensor) and t.__dict__.get(_TAG, False)


def _tag(t: Any) -> Any:
    if isinstance(t, Tensor):
        t.__dict__[_TAG] = True
    return t


def _untag(t: Any) -> Any:
    if isinstance(t, Tensor):
        t.__dict__.pop(_TAG, None)
    return t


def _is_cuda_device(device: Any) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, torch.device) and device.type == "cuda"


def _name(func) -> str:
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__"):
        owner = getattr(func, "__self__", None)
        return f"{getattr(owner, '__name__', '?')}.{name}"
    return name


def _describe(t: Tensor) -> str:
    return f"{'cuda' if is_fake_cuda(t) else 'cpu'} {tuple(t.shape)} {t.dtype}"


class FakeCuda(TorchFunctionMode):
    """See the module docstring. ``syncs`` counts host reads of tagged tensors; ``sync_log`` names them."""

    def __init__(self):
        super().__init__()
        self.syncs = 0
        self.sync_log: list[str] = []

    def _sync(self, what: str) -> None:
        self.syncs += 1
        self.sync_log.append(what)

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = _name(func)
        if name == "device.__get__":
            return CUDA0 if is_fake_cuda(args[0]) else func(*args)
        if name == "is_cuda.__get__":
            return is_fake_cuda(args[0])
        if name == "is_cpu.__get__":
            return not is_fake_cuda(args[0])
        if name == "data.__set__":
            func(*args)
            (_tag if is_fake_cuda(args[1]) else _untag)(args[0])
            return None
        if name in ("to", "cuda", "cpu"):
            return self._move(func, name, args, kwargs)
        if name in ("numpy", "__array__") and is_fake_cuda(args[0]):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        if name == "_parse_to":  # reads arguments (Module.to's), creates nothing: the device must stay "cuda"
            return func(*args, **kwargs)
        if "device" in kwargs and _is_cuda_device(kwargs["device"]):
            kwargs["device"] = "cpu"
            return tree_map(_tag, func(*args, **kwargs))
        flat = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, Tensor)]
        tagged = [t for t in flat if is_fake_cuda(t)]
        if tagged:
            self._check_mix(name, args, kwargs, flat)
            if name in _SYNC_METHODS or (name in _INDEXING and _has_bool_index(args)):
                self._sync(name)
        out = func(*args, **kwargs)
        if tagged and name not in ("__get__",) and not name.endswith("__set__"):
            if name == "grad.__get__" and out is None:
                return out
            tree_map(_tag, out)
        return out

    def _check_mix(self, name: str, args, kwargs, flat: list[Tensor]) -> None:
        if name in _CROSS_DEVICE:
            return
        checked = flat
        if name in _INDEXING:  # self and the assigned value must agree; the index may be on the CPU
            checked = [a for a in (args[0], *(args[2:] if name == "__setitem__" else ())) if isinstance(a, Tensor)]
        if any(is_fake_cuda(t) for t in checked):
            cpu = [t for t in checked if not is_fake_cuda(t) and t.dim() > 0]
            if cpu:
                raise DeviceMixError(f"{name} mixes a CUDA tensor with a CPU tensor: "
                                     + ", ".join(_describe(t) for t in checked))

    def _move(self, func, name: str, args, kwargs):
        src = args[0]
        copy = bool(kwargs.pop("copy", False))  # Tensor.to(copy=True), as generate() calls it; _parse_to rejects it
        if name == "cuda":
            target, dtype, memory_format = CUDA0, None, torch.preserve_format
        elif name == "cpu":
            target, dtype, memory_format = torch.device("cpu"), None, torch.preserve_format
        else:
            target, dtype, _, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
            wanted = next((a for a in (*args[1:], kwargs.get("device"))
                           if isinstance(a, Tensor) or _is_device_like(a)), None)
            if wanted is not None:  # where the caller asked for, not the host device _parse_to was handed
                target = CUDA0 if is_fake_cuda(wanted) or (not isinstance(wanted, Tensor)
                                                           and _is_cuda_device(wanted)) else torch.device("cpu")
        moved = src.to(dtype=dtype or src.dtype, memory_format=memory_format or torch.preserve_format, copy=copy)
        if target is None:  # a dtype change only: the tag stays
            return _tag(moved) if is_fake_cuda(src) else moved
        if _is_cuda_device(target):
            if is_fake_cuda(src):
                return _tag(moved)
            return _tag(moved.clone() if moved is src else moved)
        if is_fake_cuda(src):
            self._sync("to(cpu)")
            return _untag(moved.clone() if moved is src else moved)
        return moved


def _is_device_like(a: Any) -> bool:
    return isinstance(a, (str, torch.device)) or (isinstance(a, int) and not isinstance(a, bool))


def _has_bool_index(args) -> bool:
    index = args[1] if len(args) > 1 else None
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, Tensor) and i.dtype == torch.bool and i.dim() > 0 for i in items)


def _tagging_module(module: types.ModuleType) -> types.SimpleNamespace:
    """A kernel family whose functions tag their outputs when an input is tagged (a CUDA kernel's contract)."""
    def wrap(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            if any(is_fake_cuda(a) for a in tree_flatten((args, kwargs))[0]):
                tree_map(_tag, out)
            return out
        return call

    return types.SimpleNamespace(**{k: wrap(v) if callable(v) else v for k, v in vars(module).items()
                                    if not k.startswith("__")})


def _swap_modules(modules: dict[str, Any]):
    """Put ``modules`` in ``sys.modules``; returns the function that puts the old entries back.

    Only these entries: ``mock.patch.dict(sys.modules)`` restores the whole table, dropping every
    module imported meanwhile, and re-importing some of torch's registers their operators twice.
    """
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)

    def restore() -> None:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    return restore


@contextmanager
def fake_cuda():
    """Run the body as if on a one-GPU machine; yields the ``FakeCuda`` mode (its ``syncs`` counter)."""
    import cuda_ext
    from tests import gsplat_standin

    real_load = cuda_ext.load
    families = {}

    def load(name: str):
        if name.endswith("_cuda"):
            if name not in families:
                cpu = real_load(name[: -len("_cuda")] + "_cpu")
                families[name] = None if cpu is None else _tagging_module(cpu)
            return families[name]
        return real_load(name)

    def require(name: str):
        module = load(name)
        if module is None:
            raise cuda_ext.KernelBuildError(f"cannot build {name} (fake CUDA: its CPU build failed)")
        return module

    rng = {"state": torch.get_rng_state()}
    mode = FakeCuda()
    original_new = torch.nn.Parameter.__new__

    def parameter_new(cls, data=None, requires_grad=True):
        p = original_new(cls, data, requires_grad)
        return _tag(p) if is_fake_cuda(data) else p

    with ExitStack() as stack:
        for target, value in {
            "torch.cuda.is_available": lambda: True,
            "torch.cuda.device_count": lambda: 1,
            "torch.cuda.current_device": lambda: 0,
            "torch.cuda.get_device_name": lambda *a: "fake CUDA device (CPU)",
            "torch.cuda.get_device_capability": lambda *a: (9, 0),
            "torch.cuda.synchronize": lambda *a: mode._sync("cuda.synchronize"),
            "torch.cuda.get_rng_state": lambda *a: rng["state"].clone(),
            "torch.cuda.set_rng_state": lambda state, *a: rng.__setitem__("state", state.clone()),
            "torch.cuda.manual_seed": lambda seed: None,
            "torch.cuda.manual_seed_all": lambda seed: None,
            "torch.cuda.max_memory_allocated": lambda *a: 0,
            "torch.cuda.reset_peak_memory_stats": lambda *a: None,
            "torch.cuda.empty_cache": lambda: None,
            "torch.cuda.current_stream": lambda *a: _IDLE_STREAM,
            "torch.accelerator.current_stream": lambda *a: _IDLE_STREAM,
            "cuda_ext.load": load,
            "cuda_ext.require": require,
        }.items():
            stack.enter_context(mock.patch(target, value))
        stack.enter_context(mock.patch.object(torch.nn.Parameter, "__new__", parameter_new))
        stack.callback(_swap_modules({"gsplat": gsplat_standin, "gsplat.cuda": gsplat_standin.cuda,
                                      "gsplat.cuda._backend": gsplat_standin.cuda._backend}))
        from recon4d.device import gsplat_kernels

        gsplat_kernels.cache_clear()
        stack.callback(gsplat_kernels.cache_clear)
        stack.enter_context(mode)
        yield mode

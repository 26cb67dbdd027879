"""Array plumbing shared by the front ends: numpy arrays and CPU torch
tensors go to the extension as they are (no copy); outputs are allocated in
the caller's framework."""

import sys

import numpy as np

GROUP_LIST_TYPES = {"count": 0, "cumsum": 1, 0: 0, 1: 1}


def is_torch(a):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def as_array(a):
    """numpy arrays and torch tensors pass through; anything else (lists,
    scalars) goes through numpy.asarray."""
    if isinstance(a, np.ndarray) or is_torch(a):
        return a
    return np.asarray(a)


def dtype_name(a):
    if is_torch(a):
        return str(a.dtype).replace("torch.", "")
    return a.dtype.name


def dim(a, d):
    """Size of dimension d, or 0 when the array has fewer dimensions (the
    library then reports the rank with its own message)."""
    return int(a.shape[d]) if a.ndim > d else 0


def dtype_str(dtype):
    """'float32', torch.float32, numpy.float32, ... -> 'float32'."""
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    return np.dtype(dtype).name


def empty(like, shape, dtype):
    """An uninitialised array of `dtype` in `like`'s framework (on the CPU)."""
    shape = tuple(max(int(s), 0) for s in shape)
    dtype = dtype_str(dtype)
    if is_torch(like):
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device="cpu")
    if dtype == "bfloat16":
        raise ValueError("bfloat16 needs torch tensors: numpy has no bfloat16 type")
    return np.empty(shape, dtype=dtype)


def group_list_type(value):
    try:
        return GROUP_LIST_TYPES[value]
    except (KeyError, TypeError):
        raise ValueError(f"group_list_type={value!r} must be 'count' or 'cumsum'") from None


def limit(value):
    """None (no limit) -> -1 as the C API spells it."""
    return -1 if value is None else int(value)

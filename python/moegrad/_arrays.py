"""Array plumbing shared by the front ends: numpy arrays and CPU torch
tensors go to the extension as they are (no copy); outputs are allocated in
the caller's framework."""

import operator
import sys
import warnings

import numpy as np

GROUP_LIST_TYPES = {"count": 0, "cumsum": 1, 0: 0, 1: 1}


def is_torch(a):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def as_array(a, name):
    """numpy arrays and torch tensors pass through; anything else (lists,
    scalars, objects exporting __dlpack__ or the buffer protocol) goes
    through numpy.asarray, which must give numbers."""
    if isinstance(a, np.ndarray) or is_torch(a):
        return a
    if isinstance(a, (str, bytes, bytearray)):  # numpy would make them one string element
        raise TypeError(f"{name}: expected a numpy array, a torch tensor or numbers, got {type(a).__name__}")
    if (hasattr(a, "__dlpack__") and not hasattr(a, "__array__")) or type(a).__name__ == "PyCapsule":
        return from_dlpack(a, name)
    array = np.asarray(a)
    if array.dtype == object:
        raise TypeError(f"{name}: expected a numpy array, a torch tensor or numbers, got {type(a).__name__}")
    return array


def from_dlpack(a, name):
    """An object exporting only __dlpack__, or a bare DLPack capsule
    (torch.utils.dlpack.to_dlpack, consumed once as the protocol says),
    imported without a copy: an object's through numpy, or through torch for
    what numpy has no type for (bfloat16); a capsule through torch, which
    made it, or numpy where torch is not installed. The capsule is checked
    first for what those importers would crash on or misread (a shape or
    strides past 63 bits, NULL data, and for torch a negative stride or a
    byte_offset): TypeError then, the capsule unused."""
    from . import _moegrad

    torch = None  # the importer, where not numpy
    if type(a).__name__ == "PyCapsule":
        capsule, torch = a, _torch_or_none()
        _moegrad.check_importable_capsule(capsule, name, torch is not None)
    else:
        try:
            capsule = a.__dlpack__()
        except Exception as e:  # whatever the exporter raises
            raise TypeError(f"{name}: its __dlpack__() failed: {type(e).__name__}: {e}") from None
        if _moegrad.check_importable_capsule(capsule, name, False) == (4, 16):  # kDLBfloat: not numpy's
            torch = _torch_or_none()
            if torch is None:
                raise TypeError(f"{name}: a bfloat16 DLPack export needs torch to be read")
            _moegrad.check_importable_capsule(capsule, name, True)  # also what torch in particular would misread
    if torch is not None:
        try:
            return torch.from_dlpack(capsule)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            raise TypeError(f"{name}: cannot import this DLPack capsule (torch: {e})") from None
    try:
        return np.from_dlpack(_Exported(capsule))
    except (TypeError, ValueError, RuntimeError, BufferError) as e:
        raise TypeError(f"{name}: cannot import this DLPack export (numpy: {e})") from None

def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Exported:
    """A capsule already taken from its exporter, for numpy.from_dlpack,
    which asks an object for it (and for its device: the CPU, checked)."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def integer(name, value, lo, hi=2**63 - 1):
    """An integer argument in [lo, hi]: a float or an out-of-range value is
    the caller's mistake, not something to truncate or to overflow in C."""
    try:
        if _is_boolean(value):  # operator.index takes True as 1
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is not in [{lo}, {hi}]")
    return value


def _is_boolean(value):
    if isinstance(value, (bool, np.bool_)):
        return True
    return is_torch(value) and value.dtype == sys.modules["torch"].bool


def boolean(name, value):
    """A flag: True or False, numpy's, a one-element bool array or tensor,
    or the integers 0 and 1; not any value Python would take as true (the
    string "False" is)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.dtype == np.bool_ and value.size == 1:
            return bool(value)
    elif is_torch(value):
        if value.dtype == sys.modules["torch"].bool and value.numel() == 1:
            return bool(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            number = None
        if number in (0, 1):
            return bool(number)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


# A dimension of a tensor (SPEC 4: below 2^31).
MAX_DIM = 2**31 - 1


def warn_untracked(op, *arrays):
    """The operators compute outside autograd: a result made from a tensor
    that requires grad, with grad mode on, has no grad_fn, so gradients stop
    there (an error at backward() if nothing else requires grad, else a
    silently missing contribution). moegrad.torch.moe_experts is the layer
    that records them; under torch.no_grad() nothing is lost."""
    if not any(is_torch(a) and a.requires_grad for a in arrays):
        return
    import torch

    if torch.is_grad_enabled():
        warnings.warn(f"moegrad.{op} does not record autograd: gradients will not flow to inputs that "
                      "require grad; use moegrad.torch.moe_experts for the differentiable layer, or call "
                      "this under torch.no_grad()", UserWarning, stacklevel=3)


def check_out(out, name="out"):
    """Called before `out` is written: refuses what torch would refuse to
    write in place. An output written behind autograd's back would silently
    corrupt the gradients of anything that needs it, and an inference tensor
    may be written only in inference mode (else a retried accumulate would
    add twice). Only torch tensors, numpy arrays and other buffer-protocol
    objects may be written: the buffer protocol says whether memory is
    writable, DLPack (0.6) does not, so another __dlpack__ exporter (a JAX
    array, immutable) or a bare capsule would be written behind its back."""
    if not is_torch(out):
        if not isinstance(out, np.ndarray) and (hasattr(out, "__dlpack__") or type(out).__name__ == "PyCapsule"):
            raise TypeError(f"{name}: a DLPack {'capsule' if type(out).__name__ == 'PyCapsule' else 'exporter'} "
                            f"({type(out).__name__}) cannot be written, as DLPack does not say whether its memory "
                            "may be; pass a torch tensor or a numpy array (or leave out= unset)")
        return
    import torch

    if out.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{name} requires grad: moegrad writes it outside autograd; pass a tensor that "
                         "does not, or write under torch.no_grad()")
    if out.is_inference() and not torch.is_inference_mode_enabled():
        raise RuntimeError(f"{name} is an inference tensor: torch allows writing it in place only inside "
                           "torch.inference_mode()")


def mark_written(out):
    """Called once `out` was written: a torch `out` is marked as an in-place
    op marks it (its version counter), so a tensor saved for backward and
    overwritten here is reported by backward() instead of giving wrong
    gradients. Only after a successful call: a refused one wrote nothing,
    and a failed torch in-place op leaves the counter too. An in-place op on
    an empty view costs nothing and shares the counter."""
    if is_torch(out):
        out.detach().as_strided((0,), (1,)).zero_()


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


def dtype_choice(name, dtype, allowed):
    """A dtype argument (a name, a torch or numpy dtype) that must be one of
    `allowed`: its name, or ValueError (not torch's or numpy's own error for
    an unknown name)."""
    try:
        text = dtype_str(dtype)
    except TypeError:
        text = None
    if text not in allowed:
        raise ValueError(f"{name}={dtype!r} is not one of {', '.join(allowed)}")
    return text


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


def owned_copy(a):
    """A copy of `a` that owns just its own elements."""
    return a.clone() if is_torch(a) else a.copy()


def group_list_type(value):
    key = None  # True and 1.0 would find the entry of 1
    if isinstance(value, str):
        key = value
    elif not _is_boolean(value):
        try:
            key = operator.index(value)
        except TypeError:
            pass
    if key not in GROUP_LIST_TYPES:
        raise ValueError(f"group_list_type={value!r} must be 'count' or 'cumsum' (or 0 or 1)")
    return GROUP_LIST_TYPES[key]


def limit(name, value):
    """None (no limit) -> -1 as the C API spells it; else a count >= 0."""
    return -1 if value is None else integer(name, value, 0)

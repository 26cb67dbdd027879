"""moegrad: a deterministic Mixture-of-Experts expert layer for CPUs.

Operators (numpy arrays or CPU torch tensors; float32, float16, and bfloat16
as torch tensors; indices int32 or int64; no copies of the inputs):

    moe_init_routing(x, expert_idx, num_experts)        -> expanded_x, expanded_row_idx, group_list
    grouped_matmul(expanded_x, weight, group_list)      -> y
    grad_x(grad_y, weight, expanded_row_idx, group_list, batch, top_k)   -> grad_x  (fused)
    grouped_matmul_weight_grad(expanded_x, grad_y, group_list)            -> grad_weight
    moe_init_routing_grad(grad_expanded_x, expanded_row_idx, batch, top_k) -> grad_x  (non-fused scatter-add)

Every GEMM accumulates in fp32 in a fixed order, so results are bitwise
identical for any thread count, NaNs included: every NaN a GEMM or a
scatter-add stores is the one canonical NaN (float32 0x7fc00000, np.nan's
bits; float16 0x7e00; bfloat16 0x7fc0), while moe_init_routing copies
rows, NaN bits and all. Bad input
raises moegrad.Error, a ValueError whose message is the library's and whose
.status names the moegrad_status. Arguments checked in Python before the
library is called raise without a .status: a plain ValueError for a value
out of range (an integer past its limits, an unknown group_list_type or
dtype name), TypeError for one of the wrong kind; catch ValueError to have
both kinds of bad values.
These operators do not record autograd (one given a tensor that requires
grad, with grad mode on, warns); the PyTorch autograd layer is the module
moegrad.torch, which `import moegrad` leaves out: `import moegrad.torch`.
"""

import threading

import numpy as np

from . import _arrays
from ._moegrad import Context, Error, isa_available
from . import _moegrad as _C

__version__ = _C.version()

__all__ = [
    "Context", "Error", "isa_available", "info", "set_num_threads", "get_num_threads",
    "moe_init_routing", "grouped_matmul", "grouped_matmul_weight_grad", "moe_init_routing_grad",
    "grad_x", "moe_init_routing_grouped_matmul_grad",
]

_default_context = None
# Made once: a thread's first call and another's set_num_threads() must not
# each make one, the last to assign it losing the other's thread count.
_default_context_lock = threading.Lock()


def _context_from_state(state):
    """Rebuilds a Context pickled below protocol 2, whose __reduce_ex__ names this."""
    return _C._context_from_state(state)


def set_num_threads(num_threads):
    """Threads for calls without an explicit context (0: the library default,
    MOEGRAD_NUM_THREADS or the number of CPUs the calling thread may use)."""
    global _default_context
    with _default_context_lock:
        if _default_context is None:
            _default_context = Context(num_threads)
        else:
            _default_context.num_threads = num_threads


def get_num_threads():
    """The threads of calls without an explicit context."""
    return _context(None).num_threads


def info(context=None):
    """What the library sees on this machine, as `moegrad info --json` prints
    it (without the oneDNN and memory keys, which belong to the command's
    benchmark and run): version,
    cpu, isa (the path the context runs), isa_available, avx512_bf16,
    threads, affinity_cpus, cgroup_cpu_limit (None when none) and
    usable_cpus (the thread count they give without MOEGRAD_NUM_THREADS),
    engine,
    l1d_bytes/l2_bytes (the per-core caches the blocks are
    fitted to), os_l1d_bytes/os_l2_bytes (what the OS reports; None when
    nothing), environment (the MOEGRAD_* variables, None when unset) and
    ignored_environment (other MOEGRAD_* names set, which the library does
    not read, each with the variable it may be a misspelling of, or None).
    Without `context`, a fresh context is made from the environment, so a
    malformed variable raises moegrad.Error. Attach it to bug reports:
    `python3 -m moegrad` prints it as JSON."""
    return {"version": __version__, **_C.context_info(context if context is not None else Context())}


def _out_dtype(out_dtype, like):
    if out_dtype is None:
        return _arrays.dtype_name(like)  # the library reports an unsupported one
    return _arrays.dtype_choice("out_dtype", out_dtype, ("float32", "float16", "bfloat16"))


def _check_out_dtype(out_dtype, out):
    """out_dtype given beside out=: it must name out's dtype, or the call
    would write another dtype than the one asked for."""
    if out_dtype is None:
        return
    want = _out_dtype(out_dtype, out)
    have = _arrays.dtype_name(out) if hasattr(out, "dtype") else np.asarray(out).dtype.name
    if have != want:
        raise ValueError(f"out_dtype={want!r} but out is {have}: leave out_dtype unset or make them agree")


def _context(context):
    if context is not None and not isinstance(context, Context):
        raise TypeError(f"context must be a moegrad.Context or None, got {type(context).__name__}")
    return context if context is not None else _package_context()


def _package_context():
    """The context of calls without one: made at first use, from the
    environment then (MOEGRAD_NUM_THREADS, MOEGRAD_ISA), and kept, so that
    get_num_threads() reports what the calls use."""
    global _default_context
    context = _default_context
    if context is None:
        with _default_context_lock:
            if _default_context is None:
                _default_context = Context()
            context = _default_context
    return context


def _batch_top_k(batch, top_k, row_idx_type):
    """Checked before an output of `batch` rows is allocated: batch is a
    dimension of grad_x."""
    return (_arrays.integer("batch", batch, 1, _arrays.MAX_DIM), _arrays.integer("top_k", top_k, 1),
            _arrays.integer("row_idx_type", row_idx_type, 0, 1))


def moe_init_routing(x, expert_idx, num_experts, *, active_num=None, capacity=None, row_idx_type=0,
                     index_dtype="int64", context=None):
    """Sorts the batch*top_k routing slots by expert (stably, by original
    position p = b*top_k + j) and gathers the token rows.

    x: [batch, K]; expert_idx: [batch, top_k] with values in [0, num_experts).
    capacity: keep each expert's first `capacity` slots; active_num: then keep
    the first `active_num` rows. Returns (expanded_x [M, K] in x's dtype,
    expanded_row_idx, group_list [num_experts] counts), where expanded_row_idx
    is [M] expanded->original positions (row_idx_type 0) or [batch*top_k]
    original->expanded rows with -1 for dropped slots (row_idx_type 1).
    """
    x, expert_idx = _arrays.as_array(x, "x"), _arrays.as_array(expert_idx, "expert_idx")
    _arrays.warn_untracked("moe_init_routing", x)
    batch, K, top_k = _arrays.dim(x, 0), _arrays.dim(x, 1), _arrays.dim(expert_idx, 1)
    G = _arrays.integer("num_experts", num_experts, 1, _arrays.MAX_DIM)
    active, cap = _arrays.limit("active_num", active_num), _arrays.limit("capacity", capacity)
    row_idx_type = _arrays.integer("row_idx_type", row_idx_type, 0, 1)
    index_dtype = _arrays.dtype_choice("index_dtype", index_dtype, ("int32", "int64"))
    try:
        rows = _C.max_rows(batch, top_k, G, active, cap)
    except Error:
        rows = 0  # the operator below reports the problem in full
    expanded_x = _arrays.empty(x, (rows, K), _arrays.dtype_name(x))
    idx_len = rows if row_idx_type == 0 else batch * top_k
    if idx_len > _arrays.MAX_DIM:
        idx_len = 0  # no such array may be passed: the operator says why, nothing huge is allocated
    expanded_row_idx = _arrays.empty(x, (idx_len,), index_dtype)
    group_list = _arrays.empty(x, (G,), index_dtype)
    M = _C.moe_init_routing(x, expert_idx, expanded_x, expanded_row_idx, group_list, active, cap,
                            int(row_idx_type), _context(context))
    if M < rows:
        # Copied, not sliced: a slice would keep the worst case's `rows`
        # rows alive (capacity or active_num dropped the rest), in autograd's
        # saved tensors too.
        expanded_x = _arrays.owned_copy(expanded_x[:M])
        if row_idx_type == 0:
            expanded_row_idx = _arrays.owned_copy(expanded_row_idx[:M])
    return expanded_x, expanded_row_idx, group_list


def grouped_matmul(x, weight, group_list, *, group_list_type="count", out_dtype=None, out=None, context=None):
    """y[i] = x[i] @ weight[g(i)] for the rows of each expert (fp32 accumulation).

    x: [M, K]; weight: [G, K, N] (any strides, e.g. a transposed view);
    group_list: [G] counts (or cumsums). y is [M, N] in x's dtype (rounded
    once) or out_dtype='float32'; `out` receives it if given (out_dtype, if
    given too, must name out's dtype).
    """
    x, weight, group_list = (_arrays.as_array(a, n) for a, n in ((x, "x"), (weight, "weight"),
                                                                 (group_list, "group_list")))
    _arrays.warn_untracked("grouped_matmul", x, weight)
    if out is None:
        shape = (_arrays.dim(x, 0), _arrays.dim(weight, 2))
        out = _arrays.empty(x, shape, _out_dtype(out_dtype, x))
    else:  # a caller's array: checked, and marked as written once written
        _arrays.check_out(out)
        _check_out_dtype(out_dtype, out)
    _C.grouped_matmul(x, weight, group_list, out, _arrays.group_list_type(group_list_type), _context(context))
    _arrays.mark_written(out)
    return out


def grouped_matmul_weight_grad(x, grad_y, group_list, *, group_list_type="count", out_dtype=None, out=None,
                               accumulate=False, context=None):
    """grad_weight[g] = x_g^T @ grad_y_g over the rows of expert g.

    x: [M, K]; grad_y: [M, N]; returns [G, K, N] in x's dtype or
    out_dtype='float32' (an empty expert gives zeros). accumulate=True adds
    into `out`, which must then be a float32 [G, K, N] array (main_grad style);
    out_dtype, if given with `out`, must name out's dtype.
    """
    x, grad_y, group_list = (_arrays.as_array(a, n) for a, n in ((x, "x"), (grad_y, "grad_y"),
                                                                 (group_list, "group_list")))
    _arrays.warn_untracked("grouped_matmul_weight_grad", x, grad_y)
    accumulate = _arrays.boolean("accumulate", accumulate)
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs out=, the float32 [G, K, N] buffer to add into")
        shape = (_arrays.dim(group_list, 0), _arrays.dim(x, 1), _arrays.dim(grad_y, 1))
        out = _arrays.empty(x, shape, _out_dtype(out_dtype, x))
    else:
        _arrays.check_out(out)
        _check_out_dtype(out_dtype, out)
    _C.grouped_matmul_weight_grad(x, grad_y, group_list, out, _arrays.group_list_type(group_list_type),
                                  accumulate, _context(context))
    _arrays.mark_written(out)
    return out


def moe_init_routing_grad(grad_expanded_x, expanded_row_idx, batch, top_k, *, row_idx_type=0, out=None,
                          context=None):
    """The non-fused scatter-add (the backward of moe_init_routing):
    grad_x[b] = the sum of the rows of grad_expanded_x [M, K] that belong to
    token b, in ascending row order; expanded_row_idx and row_idx_type as
    for grad_x. After grouped_matmul(grad_y, weight^T) in float32 it gives
    grad_x's exact bits. Returns float32 [batch, K] (or writes `out`)."""
    grad_expanded_x = _arrays.as_array(grad_expanded_x, "grad_expanded_x")
    expanded_row_idx = _arrays.as_array(expanded_row_idx, "expanded_row_idx")
    _arrays.warn_untracked("moe_init_routing_grad", grad_expanded_x)
    batch, top_k, row_idx_type = _batch_top_k(batch, top_k, row_idx_type)
    if out is None:
        out = _arrays.empty(grad_expanded_x, (batch, _arrays.dim(grad_expanded_x, 1)), "float32")
    else:
        _arrays.check_out(out)
    _C.moe_init_routing_grad(grad_expanded_x, expanded_row_idx, out, batch, top_k, row_idx_type, _context(context))
    _arrays.mark_written(out)
    return out


def grad_x(grad_y, weight, expanded_row_idx, group_list, batch, top_k, *, row_idx_type=0,
           group_list_type="count", out=None, context=None):
    """The fused input gradient of the expert layer
    (moe_init_routing_grouped_matmul_grad):

        grad_x[b, k] = sum over the expanded rows i of token b (ascending i)
                         of sum_n grad_y[i, n] * weight[g(i), k, n]

    without materialising d_expanded_x = grad_y @ weight^T. The bits are the
    same for every thread count, ISA path and input layout.

    grad_y: [M, N]; weight: [G, K, N], same dtype (float32, float16, or
    bfloat16 as torch tensors); any strides.
    expanded_row_idx: int32 or int64. row_idx_type 0: [L >= M], the original
    position p = b*top_k + j of each expanded row (-1: a padding row, whose
    gradient is dropped). row_idx_type 1: [L <= batch*top_k], the expanded
    row of each original position (-1: a dropped slot).
    group_list: [G] int32 or int64, the rows of each expert
    (group_list_type "count") or their running totals ("cumsum"); expert g
    owns the expanded rows that follow expert g-1's.
    out: a float32 [batch, K] array or tensor to write instead of a new one.
    context: a moegrad.Context (threads, ISA path, fast bf16), or None for the
    default one.

    Returns grad_x, float32 [batch, K], in grad_y's framework (numpy or
    torch); a token with no rows gets +0.0. Bad input raises moegrad.Error
    (a ValueError with .status), a plain ValueError for an integer out of
    range (batch=0) or an unknown group_list_type, or TypeError for an
    argument of the wrong kind, and writes nothing."""
    grad_y, weight, expanded_row_idx, group_list = (
        _arrays.as_array(a, n) for a, n in ((grad_y, "grad_y"), (weight, "weight"),
                                            (expanded_row_idx, "expanded_row_idx"), (group_list, "group_list")))
    _arrays.warn_untracked("grad_x", grad_y, weight)
    batch, top_k, row_idx_type = _batch_top_k(batch, top_k, row_idx_type)
    if out is None:
        out = _arrays.empty(grad_y, (batch, _arrays.dim(weight, 1)), "float32")
    else:
        _arrays.check_out(out)
    _C.grad_x(grad_y, weight, expanded_row_idx, group_list, out, batch, top_k, row_idx_type,
              _arrays.group_list_type(group_list_type), _context(context))
    _arrays.mark_written(out)
    return out


moe_init_routing_grouped_matmul_grad = grad_x

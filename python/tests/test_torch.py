"""moegrad.torch: the autograd expert layer against PyTorch autograd of the
reference composition, finite differences, determinism, and refusals."""

import gc
import re
import sys
import warnings
import weakref

import numpy as np
import pytest
import torch

import moegrad
import moegrad.torch as mgt
import moe_reference as ref


def reference_layer(x, expert_idx, weight, active_num=None, capacity=None):
    """Plain PyTorch: the permute, a matmul per expert, in float64 (differentiable)."""
    G, top_k = weight.shape[0], expert_idx.shape[1]
    pos, counts = ref.routing(expert_idx, G, active_num, capacity)
    expanded = x[pos // top_k]
    s = ref.starts(counts)
    y = torch.cat([expanded[s[g]:s[g + 1]] @ weight[g] for g in range(G)])
    return y, pos, counts


def make_inputs(batch, top_k, G, K, N, dtype, empty=(1,)):
    x = torch.empty(batch, K).uniform_(-1, 1).to(dtype).requires_grad_()
    w = torch.empty(G, K, N).uniform_(-1, 1).to(dtype).requires_grad_()
    return x, ref.random_experts(batch, top_k, G, empty=empty), w


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("active_num,capacity", [(None, None), (30, 9)])
def test_forward_and_gradients_match_pytorch_autograd(dtype, active_num, capacity):
    batch, top_k, G, K, N = 24, 2, 5, 16, 12
    x, e, w = make_inputs(batch, top_k, G, K, N, dtype)
    y, idx, gl = mgt.moe_experts(x, e, w, active_num=active_num, capacity=capacity)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y_ref, pos, counts = reference_layer(x64, e, w64, active_num, capacity)
    assert y.dtype == dtype and idx.dtype == torch.int64 and gl.dtype == torch.int64
    assert torch.equal(idx, pos) and torch.equal(gl, counts)
    assert not idx.requires_grad and not gl.requires_grad
    y_abs = reference_layer(x64.detach().abs(), e, w64.detach().abs(), active_num, capacity)[0]
    ref.assert_within(y, y_ref.detach(), y_abs, K, dtype, "y")

    upstream = torch.empty(y.shape).uniform_(-1, 1).to(dtype)
    (y * upstream).sum().backward()
    (y_ref * upstream.double()).sum().backward()
    assert x.grad.dtype == dtype and w.grad.dtype == dtype
    # Bounds from the terms' magnitudes: grad_x sums N*top_k products, the
    # weight grad an expert's rows; one final rounding to the dtype.
    gx_abs = ref.grad_x(upstream.double().abs(), w64.detach().abs(), pos, counts, batch, top_k)
    ref.assert_within(x.grad, x64.grad, gx_abs, N + top_k + 1, dtype, "grad x")
    gw_abs = ref.weight_grad(x64.detach()[pos // top_k].abs(), upstream.double().abs(), counts)
    ref.assert_within(w.grad, w64.grad, gw_abs, int(counts.max()) + 1, dtype, "grad weight")
    assert torch.equal(w.grad[1], torch.zeros(K, N, dtype=dtype))  # the empty expert


def test_gradcheck_finite_differences():
    """The layer is linear in x and in weight, so central differences of the
    fp32 forward are exact up to fp32 rounding: gradcheck with fp32 inputs and
    a tolerance well above 2^-24 relative."""
    x, e, w = make_inputs(5, 2, 3, 4, 3, torch.float32, empty=())
    fn = lambda x_, w_: mgt.moe_experts(x_, e, w_)[0]  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gradcheck warns about non-double inputs
        assert torch.autograd.gradcheck(fn, (x, w), eps=1e-2, atol=1e-3, rtol=1e-3, check_undefined_grad=False,
                                        check_batched_grad=False)


def test_backward_never_builds_d_expanded_x(monkeypatch):
    x, e, w = make_inputs(16, 2, 4, 8, 8, torch.float32)
    y, _, _ = mgt.moe_experts(x, e, w)

    def forbidden(*args, **kwargs):
        raise AssertionError("the backward must not run the non-fused path")

    monkeypatch.setattr(moegrad, "grouped_matmul", forbidden)
    monkeypatch.setattr(moegrad, "moe_init_routing_grad", forbidden)
    y.sum().backward()
    assert x.grad is not None and w.grad is not None


def test_only_requested_gradients():
    x, e, w = make_inputs(8, 2, 3, 4, 5, torch.float32)
    x.requires_grad_(False)
    mgt.moe_experts(x, e, w)[0].sum().backward()
    assert x.grad is None and w.grad is not None


def run_layer(x, e, w, context):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y, _, _ = mgt.moe_experts(x, e, w, context)
    (y * torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(y.dtype)).sum().backward()
    return y.detach(), x.grad, w.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_same_bits_for_any_thread_count(dtype):
    x, e, w = make_inputs(300, 2, 6, 96, 80, dtype)
    saved = torch.get_num_threads()
    try:
        results = []
        for torch_threads in (1, 2):
            torch.set_num_threads(torch_threads)
            for threads in (1, 2, 3):
                results.append(run_layer(x, e, w, moegrad.Context(num_threads=threads)))
    finally:
        torch.set_num_threads(saved)
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            assert torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                               b.view(torch.int16 if b.element_size() == 2 else torch.int32))


def test_module_trains():
    torch.manual_seed(1)
    layer = mgt.MoEExperts(4, 8, 6, dtype=torch.float32)
    assert layer.weight.shape == (4, 8, 6) and "num_experts=4" in repr(layer)
    x = torch.randn(32, 8)
    e = ref.random_experts(32, 2, 4)
    target = torch.randn(32, 6)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        y, idx, _ = layer(x, e)
        loss = ((mgt.moe_combine(y, idx, 32, 2) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_the_module_takes_capacity_and_a_device_as_torch_modules_do():
    x, e, _ = make_inputs(10, 2, 3, 4, 5, torch.float32, empty=())
    layer = mgt.MoEExperts(3, 4, 5)
    got = layer(x, e, capacity=2, active_num=15)
    want = mgt.moe_experts(x, e, layer.weight, capacity=2, active_num=15)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert int(got[2].max()) <= 2 and int(got[2].sum()) < 20  # slots were dropped
    deferred = mgt.MoEExperts(3, 4, 5, device="meta")  # deferred initialisation, as torch's modules allow
    assert deferred.weight.device.type == "meta"
    with pytest.raises(moegrad.Error, match="^weight: a tensor on meta") as info:
        deferred(x, e)
    assert info.value.status == "MOEGRAD_STATUS_UNSUPPORTED_DEVICE"


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
def test_under_autocast_the_layer_casts_its_inputs_as_torch_matmuls_do(x_dtype):
    """CPU autocast casts a matmul's float inputs to its dtype (bf16): f32
    master weights then meet the bf16 activations autocast made upstream. The
    layer does the same, so it gives the bits of the explicitly cast call,
    and each leaf gets its gradient in its own dtype: the cast call's,
    widened exactly."""
    x, e, w = make_inputs(12, 2, 4, 8, 6, torch.float32)
    x = x.detach().to(x_dtype).requires_grad_()
    upstream = torch.empty(24, 6).uniform_(-1, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, idx, gl = mgt.moe_experts(x, e, w)
    (y.float() * upstream).sum().backward()
    xb, wb = x.detach().bfloat16().requires_grad_(), w.detach().bfloat16().requires_grad_()
    y_b, idx_b, gl_b = mgt.moe_experts(xb, e, wb)
    (y_b.float() * upstream).sum().backward()
    assert y.dtype == torch.bfloat16 and torch.equal(y, y_b)
    assert torch.equal(idx, idx_b) and torch.equal(gl, gl_b)
    assert x.grad.dtype == x_dtype and w.grad.dtype == torch.float32
    assert torch.equal(x.grad, xb.grad.to(x_dtype)) and torch.equal(w.grad, wb.grad.float())
    with pytest.raises(moegrad.Error, match="must match"):  # outside autocast the dtypes must agree
        mgt.moe_experts(x.detach().bfloat16(), e, w)


def test_batched_gradients_are_refused_saying_what_to_do_instead():
    """A torch vmap's tensors have no memory of their own: the backward of a
    vectorised jacobian, and vmap over a plain operator, get moegrad.Error
    (torch's own error for them names an internal detach)."""
    x, e, w = make_inputs(5, 2, 3, 4, 3, torch.float32, empty=())
    with pytest.raises(moegrad.Error, match=r"^grad_y: a batched tensor of a torch vmap .*vectorize=False") as info:
        torch.autograd.functional.jacobian(lambda x_: mgt.moe_experts(x_, e, w)[0], x, vectorize=True)
    assert info.value.status == "MOEGRAD_STATUS_BAD_LAYOUT"
    vmap = pytest.importorskip("functorch").vmap
    with pytest.raises(moegrad.Error, match="^x: a batched tensor of a torch vmap"):
        vmap(lambda x_: moegrad.grouped_matmul(x_, w.detach(), torch.tensor([4, 4, 2])))(torch.ones(2, 10, 4))


def test_an_export_that_fails_is_refused_with_its_own_words():
    """Not with the traceback pybind11 appends to a Python error's text."""

    class Refusing(torch.Tensor):
        def __dlpack__(self, stream=None):
            raise RuntimeError("this tensor exports nothing")

    gy = torch.Tensor._make_subclass(Refusing, torch.ones(4, 2))
    with pytest.raises(moegrad.Error, match=r"^grad_y: cannot be read through DLPack: RuntimeError: this tensor "
                                            r"exports nothing\Z") as info:
        moegrad.grad_x(gy, torch.ones(2, 3, 2), torch.arange(4), torch.tensor([2, 2]), 4, 1)
    assert info.value.status == "MOEGRAD_STATUS_BAD_LAYOUT"


# The index as moe_experts returns it (int64) and as moe_init_routing's
# index_dtype="int32" does, with and without routing weights.
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_moe_combine_matches_a_loop(index_dtype):
    y = torch.randn(6, 3)
    idx = torch.tensor([0, 3, 1, 5, 2, 4], dtype=index_dtype)  # positions p = b*top_k + j, top_k = 2
    weights = torch.rand(3, 2)
    for w in (weights, None):
        out = mgt.moe_combine(y, idx, 3, 2, w)
        want = torch.zeros(3, 3)
        for i, p in enumerate(idx.tolist()):
            want[p // 2] += (1.0 if w is None else w[p // 2, p % 2]) * y[i]
        assert torch.allclose(out, want)


@pytest.mark.parametrize("case", ["dtype mismatch", "expert out of range", "K mismatch", "float64", "idx 1-D",
                                  "negative expert"])
def test_bad_inputs_raise_value_error(case):
    x, e, w = make_inputs(6, 2, 3, 4, 5, torch.float32, empty=())
    if case == "dtype mismatch":
        w = w.detach().bfloat16()
    elif case == "expert out of range":
        e = e.clone()
        e[2, 1] = 3
    elif case == "negative expert":
        e = e.clone()
        e[0, 0] = -1
    elif case == "K mismatch":
        w = torch.randn(3, 5, 5)
    elif case == "float64":
        x, w = x.detach().double(), w.detach().double()
    elif case == "idx 1-D":
        e = e[:, 0]
    with pytest.raises(ValueError) as info:
        mgt.moe_experts(x, e, w)
    assert isinstance(info.value, moegrad.Error) and info.value.status.startswith("MOEGRAD_STATUS_")
    assert "\n" not in str(info.value) and str(info.value)


def test_inputs_that_are_not_tensors():
    """x and weight must be tensors (refused before any work, as a
    TypeError); expert_idx may be anything torch.as_tensor reads."""
    x, e, w = make_inputs(6, 2, 3, 4, 5, torch.float32, empty=())
    for bad in ({"x": x.detach().numpy()}, {"weight": w.detach().numpy()}, {"x": x.tolist()}):
        args = {"x": x, "expert_idx": e, "weight": w, **bad}
        name = next(iter(bad))
        with pytest.raises(TypeError, match=f"moe_experts: {name} must be a torch.Tensor"):
            mgt.moe_experts(**args)
    want = mgt.moe_experts(x, e, w)[0]
    for idx in (e.tolist(), e.numpy(), e.int().numpy()):
        y = mgt.moe_experts(x, idx, w)[0]
        assert torch.equal(y, want)
        y.sum().backward()


def test_error_carries_status_and_message():
    with pytest.raises(moegrad.Error) as info:
        moegrad.moe_init_routing(torch.randn(4, 3), torch.tensor([[0], [1], [7], [2]]), 3)
    assert info.value.status == "MOEGRAD_STATUS_EXPERT_OUT_OF_RANGE"
    assert "expert_idx[2, 0]=7" in str(info.value)
    with pytest.raises(TypeError, match="x: expected a numpy array, a torch tensor or numbers, got object"):
        moegrad.grouped_matmul(object(), torch.randn(1, 2, 2), torch.tensor([0]))  # numpy makes it dtype=object


def test_an_out_tensor_is_written_as_torch_in_place_ops_write():
    """`out=` is an in-place write: a tensor autograd saved and moegrad then
    overwrote makes backward() fail, as after any in-place op, instead of
    giving wrong gradients; an out that itself requires grad is refused while
    grad mode is on (moegrad cannot record the write)."""
    M, K, N, G = 6, 4, 5, 2
    x, w, counts = torch.randn(M, K), torch.randn(G, K, N), torch.tensor([2, 4])
    a = torch.randn(M, N, requires_grad=True)
    h = a * 2
    loss = (h * h).sum()  # saves h for backward
    version = h._version
    moegrad.grouped_matmul(x, w, counts, out=h.detach())
    assert h._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    leaf = torch.zeros(M, N, requires_grad=True)
    with pytest.raises(ValueError, match="out requires grad"):
        moegrad.grouped_matmul(x, w, counts, out=leaf)
    assert torch.equal(leaf, torch.zeros(M, N))
    with torch.no_grad():
        moegrad.grouped_matmul(x, w, counts, out=leaf)
    assert torch.equal(leaf.detach(), moegrad.grouped_matmul(x, w, counts))


def test_a_refused_call_leaves_the_out_tensors_version_as_it_was():
    """A failed torch in-place op leaves the version counter, and so does a
    refused moegrad call: a tensor autograd saved stays usable by backward()."""
    M, K, N, G = 6, 4, 5, 2
    x, w = torch.randn(M, K), torch.randn(G, K, N)
    a = torch.randn(M, N, requires_grad=True)
    h = a * 2
    loss = (h * h).sum()  # saves h for backward
    version, before = h._version, h.detach().clone()
    with pytest.raises(moegrad.Error, match="group_list"):
        moegrad.grouped_matmul(x, w, torch.tensor([2, 5]), out=h.detach())  # counts sum to 7, not M = 6
    with pytest.raises(TypeError, match="context must be a moegrad.Context or None, got int"):
        moegrad.grouped_matmul(x, w, torch.tensor([2, 4]), out=h.detach(), context=4)
    assert h._version == version
    assert torch.equal(h.detach(), before)
    loss.backward()
    assert torch.equal(a.grad, 8 * a.detach())


def test_tensors_dlpack_cannot_carry_raise_moegrad_error():
    """torch's __dlpack__ raises RuntimeError for bool, sparse and meta
    tensors; moegrad refuses them as it refuses the like, with a status and
    what to do instead, and writes nothing."""
    batch, top_k, G, K, N = 4, 1, 2, 3, 2
    args = {"grad_y": torch.ones(4, N), "weight": torch.ones(G, K, N), "expanded_row_idx": torch.arange(4),
            "group_list": torch.tensor([2, 2])}
    out = torch.full((batch, K), 7.0)
    cases = [("expanded_row_idx", torch.ones(4, dtype=torch.bool), "MOEGRAD_STATUS_BAD_DTYPE", "dtype bool"),
             ("weight", torch.ones(G, K, N).to_sparse(), "MOEGRAD_STATUS_BAD_LAYOUT", "a torch.sparse_coo tensor"),
             ("grad_y", torch.empty(4, N, device="meta"), "MOEGRAD_STATUS_UNSUPPORTED_DEVICE", "a tensor on meta")]
    for name, tensor, status, words in cases:
        bad = dict(args, **{name: tensor})
        with pytest.raises(moegrad.Error, match=f"^{name}: {words}") as info:
            moegrad.grad_x(bad["grad_y"], bad["weight"], bad["expanded_row_idx"], bad["group_list"], batch, top_k,
                           out=out)
        assert info.value.status == status
    assert torch.equal(out, torch.full((batch, K), 7.0))


def test_arguments_are_checked_before_anything_is_allocated():
    batch, top_k, G, K, N = 4, 2, 2, 3, 5
    gy, w = torch.randn(batch * top_k, N), torch.randn(G, K, N)
    idx, gl = torch.arange(batch * top_k), torch.tensor([4, 4])
    with pytest.raises(TypeError, match="batch must be an integer, got float 4.5"):
        moegrad.grad_x(gy, w, idx, gl, 4.5, top_k)
    with pytest.raises(ValueError, match=r"batch=1099511627776 is not in \[1, 2147483647\]"):
        moegrad.grad_x(gy, w, idx, gl, 2**40, top_k)  # was a MemoryError for a 12 TiB output
    with pytest.raises(ValueError, match="top_k=18446744073709551616 is not in"):
        moegrad.moe_init_routing_grad(torch.randn(8, K), idx, batch, 2**64)
    with pytest.raises(ValueError, match="row_idx_type=2 is not in"):
        moegrad.grad_x(gy, w, idx, gl, batch, top_k, row_idx_type=2)
    x, experts = torch.randn(batch, K), torch.zeros(batch, top_k, dtype=torch.int64)
    with pytest.raises(ValueError, match="num_experts=-2 is not in"):
        moegrad.moe_init_routing(x, experts, -2)
    with pytest.raises(ValueError, match="active_num=-1 is not in"):
        moegrad.moe_init_routing(x, experts, G, active_num=-1)  # None means no limit
    with pytest.raises(TypeError, match="weight: expected a numpy array, a torch tensor or numbers, got NoneType"):
        moegrad.grad_x(gy, None, idx, gl, batch, top_k)
    for text in ("abc", b"abcd"):
        with pytest.raises(TypeError, match="grad_y: expected a numpy array"):
            moegrad.grad_x(text, w, idx, gl, batch, top_k)
    with pytest.raises(ValueError, match="out_dtype='foo' is not one of float32, float16, bfloat16"):
        moegrad.grouped_matmul(gy, w.transpose(1, 2), gl, out_dtype="foo")
    with pytest.raises(ValueError, match="index_dtype=.*float64.* is not one of int32, int64"):
        moegrad.moe_init_routing(x, experts, G, index_dtype=torch.float64)
    with pytest.raises(moegrad.Error, match="group_list: dtype uint8 must be int32 or int64"):
        moegrad.grad_x(gy, w, idx, torch.tensor([4, 4], dtype=torch.uint8), batch, top_k)


class DLPackOnly:
    """Neither numpy nor torch: an object that only exports DLPack."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_any_dlpack_exporter_is_an_input():
    M, K, N, G = 6, 4, 5, 2
    x, w, counts = torch.randn(M, K), torch.randn(G, K, N), torch.tensor([2, 4])
    want = moegrad.grouped_matmul(x, w, counts)
    got = moegrad.grouped_matmul(DLPackOnly(x.numpy()), DLPackOnly(w.numpy()), DLPackOnly(counts.numpy()))
    assert np.array_equal(got, want.numpy())
    # bfloat16, which numpy has no type for, through torch
    xb, wb = x.bfloat16(), w.bfloat16()
    got = moegrad.grouped_matmul(DLPackOnly(xb), DLPackOnly(wb), DLPackOnly(counts))
    assert torch.equal(got, moegrad.grouped_matmul(xb, wb, counts))
    # Bare capsules (torch.utils.dlpack.to_dlpack), each consumed once.
    from torch.utils.dlpack import to_dlpack

    capsule = to_dlpack(xb)
    assert torch.equal(moegrad.grouped_matmul(capsule, to_dlpack(wb), to_dlpack(counts)),
                       moegrad.grouped_matmul(xb, wb, counts))
    with pytest.raises(TypeError, match="x: cannot import this DLPack capsule"):
        moegrad.grouped_matmul(capsule, wb, counts)


def test_an_out_only_dlpack_exports_is_refused_unwritten():
    """DLPack does not say whether memory may be written: an `out` that is
    only a DLPack exporter or capsule (say, an immutable JAX array) is
    refused before anything is written."""
    from torch.utils.dlpack import to_dlpack

    x, w, counts = torch.randn(6, 4), torch.randn(2, 4, 5), torch.tensor([2, 4])
    target = np.full((6, 5), np.nan, dtype=np.float32)
    for out, kind in ((DLPackOnly(target), "exporter"), (to_dlpack(torch.from_numpy(target)), "capsule")):
        with pytest.raises(TypeError, match=f"out: a DLPack {kind} .* cannot be written"):
            moegrad.grouped_matmul(x, w, counts, out=out)
        assert np.isnan(target).all()


def test_a_refused_buffer_is_released():
    """An array refused for its format or strides after the buffer protocol
    handed it over is released again (it leaked one reference per call)."""
    packed = np.zeros((4, 5), dtype=[("tag", "u1"), ("value", "<f4")])  # value: 5-byte strides
    w, idx, gl = np.zeros((2, 3, 5), np.float32), np.arange(4), np.array([2, 2])
    for gy, status in ((np.zeros((4, 5), dtype=">f4"), "BAD_DTYPE"), (np.zeros((4, 5), np.complex64), "BAD_DTYPE"),
                       (packed["value"], "BAD_LAYOUT")):
        before = sys.getrefcount(gy)
        for _ in range(20):
            with pytest.raises(moegrad.Error) as info:  # as the library's own refusals
                moegrad.grad_x(gy, w, idx, gl, 4, 1)
            assert info.value.status == "MOEGRAD_STATUS_" + status
            del info  # its traceback's frames hold the array
        assert sys.getrefcount(gy) == before, gy.dtype


def test_an_array_numpy_exports_no_buffer_for_is_refused_for_its_dtype():
    """numpy gives no buffer for datetime64 or timedelta64; the refusal names
    the dtype, as it does for a format moegrad does not read."""
    w, idx, gl = np.zeros((2, 3, 5), np.float32), np.arange(4), np.array([2, 2])
    for dtype in ("datetime64[s]", "timedelta64[ns]"):
        with pytest.raises(moegrad.Error, match=rf"grad_y: dtype {re.escape(dtype)}; moegrad reads") as info:
            moegrad.grad_x(np.zeros((4, 5), dtype=dtype), w, idx, gl, 4, 1)
        assert info.value.status == "MOEGRAD_STATUS_BAD_DTYPE"
    out = np.full((4, 3), np.nan, np.float32)
    out.flags.writeable = False  # a layout refusal still says what it is
    with pytest.raises(moegrad.Error, match="not writable") as info:
        moegrad.grad_x(np.zeros((4, 5), np.float32), w, idx, gl, 4, 1, out=out)
    assert info.value.status == "MOEGRAD_STATUS_BAD_LAYOUT"


def test_a_tensor_with_the_negative_bit_is_read_as_its_values():
    """x.conj().imag is a view that negates lazily; __dlpack__ exports the
    memory, which holds the values' negation."""
    batch, top_k, G, K, N = 4, 2, 2, 3, 5
    gy = torch.randn(batch * top_k, N, dtype=torch.complex64).conj().imag
    assert gy.is_neg()
    w, idx, gl = torch.randn(G, K, N), torch.arange(batch * top_k), torch.tensor([3, 5])
    values = gy.resolve_neg()
    got = moegrad.grad_x(gy, w, idx, gl, batch, top_k)
    ref.assert_within(got, ref.grad_x(values, w, idx, gl, batch, top_k),
                      ref.grad_x(values.abs(), w.abs(), idx, gl, batch, top_k), N + top_k, what="grad_x")
    out = torch.zeros(batch, K, dtype=torch.complex64).conj().imag
    with pytest.raises(ValueError, match="grad_x: a tensor with the negative bit set"):
        moegrad.grad_x(gy, w, idx, gl, batch, top_k, out=out)
    assert torch.equal(out.resolve_neg(), torch.zeros(batch, K))


def test_an_out_torch_refuses_in_place_is_not_written():
    """An inference tensor outside inference mode: torch refuses in-place
    writes to it, and so does moegrad, before writing (a retried accumulate
    used to add twice)."""
    M, K, N, G = 6, 4, 5, 2
    x, gy, counts = torch.randn(M, K), torch.randn(M, N), torch.tensor([2, 4])
    with torch.inference_mode():
        main_grad = torch.ones(G, K, N)
    with pytest.raises(RuntimeError, match="[Ii]nference"):
        moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, out_dtype="float32", accumulate=True)
    assert torch.equal(main_grad, torch.ones(G, K, N))
    with torch.inference_mode():
        moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, out_dtype="float32", accumulate=True)
    ref.assert_within(main_grad, 1 + ref.weight_grad(x, gy, counts), 1 + ref.weight_grad(x.abs(), gy.abs(), counts),
                      M + 1, what="accumulated once")


def test_moe_init_routing_refuses_outputs_no_call_could_take_before_allocating_them():
    """2^30 tokens x top-2 (broadcast views, nothing read): R = 2^31 rows
    with no limit, and type 1's index 2^31 elements even with R limited,
    each one more than a dimension may have. The library says so before
    any output is allocated (they were allocated in full first: 24 GiB)."""
    x = torch.zeros(1, 3).expand(2**30, 3)
    experts = torch.zeros(1, 1, dtype=torch.int64).expand(2**30, 2)
    with pytest.raises(moegrad.Error, match="= 2147483648 rows") as info:
        moegrad.moe_init_routing(x, experts, 4)
    assert info.value.status == "MOEGRAD_STATUS_SIZE_OVERFLOW"
    with pytest.raises(moegrad.Error, match="batch\\*top_k=2147483648 elements") as info:
        moegrad.moe_init_routing(x, experts, 4, active_num=8, row_idx_type=1)
    assert info.value.status == "MOEGRAD_STATUS_SIZE_OVERFLOW"


def test_out_dtype_must_name_the_dtype_of_out():
    """out_dtype beside out=: a dtype out does not have was once ignored,
    and the call wrote out's dtype (f16 where float32 was asked for)."""
    M, K, N, G = 6, 4, 5, 2
    x, w, counts = torch.randn(M, K).half(), torch.randn(G, K, N).half(), torch.tensor([2, 4])
    gy = torch.randn(M, N).half()
    y = torch.full((M, N), float("nan"), dtype=torch.float16)
    with pytest.raises(ValueError, match="out_dtype='float32' but out is float16"):
        moegrad.grouped_matmul(x, w, counts, out_dtype="float32", out=y)
    assert torch.isnan(y).all()
    with pytest.raises(ValueError, match="out_dtype='float64' is not one of"):
        moegrad.grouped_matmul(x, w, counts, out_dtype="float64", out=y)
    main_grad = torch.ones(G, K, N)
    with pytest.raises(ValueError, match="out_dtype='float16' but out is float32"):
        moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, out_dtype="float16", accumulate=True)
    assert torch.equal(main_grad, torch.ones(G, K, N))
    y_np = np.full((M, N), np.nan, dtype=np.float32)
    with pytest.raises(ValueError, match="out_dtype='float16' but out is float32"):
        moegrad.grouped_matmul(x.numpy(), w.numpy(), counts.numpy(), out_dtype="float16", out=y_np)
    assert np.isnan(y_np).all()
    # Agreeing, out_dtype changes nothing: the same bits as without it.
    moegrad.grouped_matmul(x, w, counts, out_dtype=torch.float16, out=y)
    assert torch.equal(y, moegrad.grouped_matmul(x, w, counts))


def test_differentiating_through_the_backward_raises():
    """A loss built from moe_experts' gradients (create_graph=True) depends
    on the weight through grad_x; its gradient must not come out silently
    missing (once_differentiable alone let it: the incoming gradient needs
    none). First-order gradients under create_graph are unchanged."""
    x, e, w = make_inputs(6, 2, 3, 4, 5, torch.float32, empty=())
    y, _, _ = mgt.moe_experts(x, e, w)
    gx, gw = torch.autograd.grad(y.sum(), (x, w), create_graph=True)
    gx1, gw1 = torch.autograd.grad(mgt.moe_experts(x, e, w)[0].sum(), (x, w))
    assert torch.equal(gx, gx1) and torch.equal(gw, gw1)
    for second in (gx, gw):
        with pytest.raises(RuntimeError, match="no second derivative"):
            (second ** 2).sum().backward(retain_graph=True)
    # They can be changed in place (clipped, scaled) with grad mode on, as
    # torch's own can.
    for first, want in ((gx, gx1), (gw, gw1)):
        first.mul_(2)
        assert torch.equal(first.detach(), want * 2)
    # The same with x an activation the caller has dropped: grad_weight
    # depends on it all the same.
    h = x * 2
    y, _, _ = mgt.moe_experts(h, e, w)
    del h
    gw, = torch.autograd.grad(y.sum(), w, create_graph=True)
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.grad((gw ** 2).sum(), x)
    # Nothing that requires grad behind a gradient: no graph, nothing to refuse.
    y, _, _ = mgt.moe_experts(x, e, w.detach())
    gx, = torch.autograd.grad(y.sum(), x, create_graph=True)
    assert not gx.requires_grad


def test_the_graph_holds_neither_x_nor_a_routed_copy_no_gradient_reads():
    """Backward reads the routed copy expanded_x (for the weight's gradient
    only) and never x: an activation that only the layer uses is freed when
    the caller drops it, as plain PyTorch would free it, and a frozen weight
    saves no [M, K] copy. The gradients are those of a run that keeps x."""
    batch, top_k, G, K, N = 12, 2, 3, 8, 6
    x, e, w = make_inputs(batch, top_k, G, K, N, torch.float32)
    upstream = torch.linspace(-1, 1, batch * top_k * N).reshape(-1, N)

    def gradients(drop_h, weight):
        x_, w_ = x.detach().clone().requires_grad_(), weight.detach().clone().requires_grad_(weight.requires_grad)
        h = x_ * 2  # saves only the scalar
        alive = weakref.ref(h)
        y, _, _ = mgt.moe_experts(h, e, w_)
        if drop_h:
            del h
            gc.collect()
            assert alive() is None, "the graph kept x alive"
        (y * upstream).sum().backward()
        return x_.grad, w_.grad

    gx, gw = gradients(True, w)
    gx_kept, gw_kept = gradients(False, w)
    assert torch.equal(gx, gx_kept) and torch.equal(gw, gw_kept)
    assert torch.equal(gradients(True, w.detach())[0], gx)

    M = batch * top_k
    for weight in (w, w.detach()):
        shapes = []

        def pack(t):
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            mgt.moe_experts(x, e, weight)
        assert ((M, K) in shapes) == weight.requires_grad, shapes


def test_an_input_changed_in_place_after_the_forward_still_has_its_gradients():
    """Neither gradient reads x's values after the forward (the weight grad
    reads the routed copy), so a residual added into x in place (h += ...)
    must not make the backward refuse; the gradients are those of a run
    without the in-place change."""
    x, e, w = make_inputs(12, 2, 3, 8, 6, torch.float32)
    upstream = torch.linspace(-1, 1, 24 * 6).reshape(24, 6)

    def gradients(change_in_place):
        x_, w_ = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        h = x_ * 1  # not a leaf: autograd allows changing it in place
        y, _, _ = mgt.moe_experts(h, e, w_)
        if change_in_place:
            h += 1
        (y * upstream).sum().backward()
        return x_.grad, w_.grad

    gx, gw = gradients(True)
    gx_plain, gw_plain = gradients(False)
    assert torch.equal(gx, gx_plain) and torch.equal(gw, gw_plain)


def test_the_plain_operators_warn_where_they_would_cut_the_graph():
    """moegrad.grouped_matmul & co. return results without a grad_fn; given
    a tensor that requires grad with grad mode on, that silently drops its
    gradient, so they warn. Not under no_grad, not for tensors that need no
    gradient, and not inside moe_experts, which records the gradients."""
    x, e, w = make_inputs(6, 2, 3, 4, 5, torch.float32, empty=())
    expanded, idx, gl = moegrad.moe_init_routing(x.detach(), e, 3)
    gy = torch.ones(expanded.shape[0], 5)
    calls = {
        "moe_init_routing": lambda t: moegrad.moe_init_routing(t, e, 3),
        "grouped_matmul": lambda t: moegrad.grouped_matmul(t, w.detach(), gl),
        "grouped_matmul_weight_grad": lambda t: moegrad.grouped_matmul_weight_grad(t, gy, gl),
        "moe_init_routing_grad": lambda t: moegrad.moe_init_routing_grad(t, idx, 6, 2),
        "grad_x": lambda t: moegrad.grad_x(gy, w, idx, gl, 6, 2),
    }
    for name, call in calls.items():
        arg = x if name == "moe_init_routing" else expanded.clone().requires_grad_()
        with pytest.warns(UserWarning, match=rf"moegrad\.{name} does not record autograd"):
            call(arg)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.no_grad():
                call(arg)
            if name != "grad_x":  # grad_x's weight is the tensor that requires grad there
                call(arg.detach())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, _, _ = mgt.moe_experts(x, e, w)
        y.sum().backward()


def test_booleans_are_not_integers():
    batch, top_k, G, K, N = 4, 2, 2, 3, 5
    gy, w = torch.randn(batch * top_k, N), torch.randn(G, K, N)
    idx, gl = torch.arange(batch * top_k), torch.tensor([4, 4])
    with pytest.raises(TypeError, match="batch must be an integer, got bool True"):
        moegrad.grad_x(gy, w, idx, gl, True, top_k)
    for bad in (True, 1.0):
        with pytest.raises(ValueError, match="group_list_type=.* must be 'count' or 'cumsum'"):
            moegrad.grad_x(gy, w, idx, gl, batch, top_k, group_list_type=bad)
    assert torch.equal(moegrad.grad_x(gy, w, idx, torch.tensor([4, 8]), batch, top_k, group_list_type=np.int64(1)),
                       moegrad.grad_x(gy, w, idx, gl, batch, top_k))

"""Every operator against the float64 PyTorch reference, from numpy and from
torch, on random routings with empty experts and dropped slots."""

import math
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

import moegrad
import moe_reference as ref

FRAMEWORK_DTYPES = [("numpy", "float32"), ("numpy", "float16"),
                    ("torch", "float32"), ("torch", "float16"), ("torch", "bfloat16")]


def as_framework(t, framework):
    """A torch tensor as the framework's array (no copy for torch)."""
    return t.numpy() if framework == "numpy" else t


def as_torch(a):
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))


def rand(shape, dtype):
    return torch.empty(shape).uniform_(-2, 2).to(ref.TORCH_DTYPES[dtype])


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("row_idx_type", [0, 1])
@pytest.mark.parametrize("active_num,capacity", [(None, None), (None, 4), (9, None), (11, 5), (0, None)])
def test_moe_init_routing(framework, dtype, row_idx_type, active_num, capacity):
    batch, top_k, G, K = 13, 3, 6, 5
    experts = ref.random_experts(batch, top_k, G, empty=(2,))
    x = rand((batch, K), dtype)
    index_dtype = "int32" if active_num is not None else "int64"
    ex, idx, gl = moegrad.moe_init_routing(as_framework(x, framework), as_framework(experts, framework), G,
                                           active_num=active_num, capacity=capacity, row_idx_type=row_idx_type,
                                           index_dtype=index_dtype)
    assert type(ex) is type(as_framework(x, framework))
    # Only the rows kept: not views of a buffer sized for the worst case.
    for out in (ex, idx):
        owned = out.base is None if isinstance(out, np.ndarray) else storage_bytes(out) == out.numel() * out.element_size()
        assert owned
    pos, counts = ref.routing(experts, G, active_num, capacity)
    ex, idx, gl = as_torch(ex), as_torch(idx), as_torch(gl)
    assert ex.dtype == x.dtype and str(idx.dtype) == f"torch.{index_dtype}"
    assert torch.equal(gl.long(), counts)
    assert torch.equal(ex, x[pos // top_k])  # bit copies of the token rows
    if row_idx_type == 0:
        assert torch.equal(idx.long(), pos)
    else:
        want = torch.full((batch * top_k,), -1, dtype=torch.int64)
        want[pos] = torch.arange(len(pos))
        assert torch.equal(idx.long(), want)


def storage_bytes(t):
    """The bytes of the memory behind a tensor (all of it, not the view's)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.storage().size() * t.element_size()


def counts_with_empty(M, G, empty):
    """Random counts over G experts summing to M, zero for `empty`."""
    live = [g for g in range(G) if g not in empty]
    cuts = torch.sort(torch.randint(0, M + 1, (len(live) - 1,))).values.tolist()
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [M])]
    counts = torch.zeros(G, dtype=torch.int64)
    counts[live] = torch.tensor(sizes)
    return counts


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("out_dtype", [None, "float32"])
@pytest.mark.parametrize("group_list_type", ["count", "cumsum"])
def test_grouped_matmul(framework, dtype, out_dtype, group_list_type):
    M, K, N, G = 61, 37, 29, 5
    counts = counts_with_empty(M, G, empty=(0, 3))
    x, w = rand((M, K), dtype), rand((G, N, K), dtype).transpose(1, 2)  # a strided weight view
    gl = counts if group_list_type == "count" else torch.cumsum(counts, 0)
    y = moegrad.grouped_matmul(as_framework(x, framework), as_framework(w, framework), as_framework(gl, framework),
                               group_list_type=group_list_type, out_dtype=out_dtype)
    y = as_torch(y)
    expected_dtype = torch.float32 if out_dtype else x.dtype
    assert y.dtype == expected_dtype and y.shape == (M, N)
    ref.assert_within(y, ref.grouped_matmul(x, w, counts), ref.grouped_matmul(x.abs(), w.abs(), counts), K,
                      expected_dtype, "grouped_matmul")


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("out_dtype", [None, "float32"])
def test_grouped_matmul_weight_grad(framework, dtype, out_dtype):
    M, K, N, G = 70, 19, 23, 6
    counts = counts_with_empty(M, G, empty=(1, 5))
    x, gy = rand((M, K), dtype), rand((M, N), dtype)
    gw = as_torch(moegrad.grouped_matmul_weight_grad(as_framework(x, framework), as_framework(gy, framework),
                                                     as_framework(counts, framework), out_dtype=out_dtype))
    expected_dtype = torch.float32 if out_dtype else x.dtype
    assert gw.dtype == expected_dtype and gw.shape == (G, K, N)
    ref.assert_within(gw, ref.weight_grad(x, gy, counts), ref.weight_grad(x.abs(), gy.abs(), counts),
                      int(counts.max()), expected_dtype, "weight_grad")
    assert torch.equal(gw[1], torch.zeros(K, N, dtype=expected_dtype))  # empty experts: exact zeros
    # Into a NaN-filled out= (numpy shares its memory): the empty experts'
    # zeros are written, not found in fresh memory.
    filled = torch.full((G, K, N), float("nan"), dtype=expected_dtype)
    moegrad.grouped_matmul_weight_grad(as_framework(x, framework), as_framework(gy, framework),
                                       as_framework(counts, framework), out=as_framework(filled, framework))
    assert torch.equal(filled[1], torch.zeros(K, N, dtype=expected_dtype))
    assert torch.equal(filled, gw)


def test_weight_grad_accumulates_into_f32():
    M, K, N, G = 40, 8, 9, 4
    counts = counts_with_empty(M, G, empty=(2,))
    x, gy = rand((M, K), "bfloat16"), rand((M, N), "bfloat16")
    main_grad = torch.randn(G, K, N)
    before = main_grad.clone()
    fresh = moegrad.grouped_matmul_weight_grad(x, gy, counts, out_dtype="float32")
    out = moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, accumulate=True)
    assert out is main_grad
    assert torch.equal(main_grad, before + fresh)  # one f32 add per element
    with pytest.raises(ValueError, match="accumulate"):
        moegrad.grouped_matmul_weight_grad(x, gy, counts, out=torch.zeros(G, K, N, dtype=torch.bfloat16),
                                           accumulate=True)
    # A flag is a boolean: "False" is a true value to Python, not False.
    for bad in ("False", 2, None, 1.0, torch.tensor([True, False]), np.array([True, False])):
        with pytest.raises(TypeError, match="accumulate must be True or False"):
            moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, accumulate=bad)
    assert torch.equal(main_grad, before + fresh)  # refused, untouched
    for flag, adds in ((np.bool_(True), True), (torch.tensor(True), True), (np.array(True), True), (1, True),
                       (0, False), (np.int64(0), False), (torch.tensor([False]), False)):
        main_grad = before.clone()
        moegrad.grouped_matmul_weight_grad(x, gy, counts, out=main_grad, accumulate=flag)
        assert torch.equal(main_grad, before + fresh if adds else fresh), repr(flag)


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("row_idx_type", [0, 1])
def test_moe_init_routing_grad_and_grad_x(framework, dtype, row_idx_type):
    batch, top_k, G, K, N = 21, 2, 5, 17, 13
    experts = ref.random_experts(batch, top_k, G, empty=(4,))
    x = rand((batch, K), dtype)
    _, idx, gl = moegrad.moe_init_routing(x, experts, G, capacity=7, row_idx_type=row_idx_type)
    pos, counts = ref.routing(experts, G, capacity=7)
    M = int(counts.sum())
    d, gy, w = rand((M, K), dtype), rand((M, N), dtype), rand((G, K, N), dtype)
    f = lambda t: as_framework(t, framework)  # noqa: E731
    owner = pos // top_k
    got = as_torch(moegrad.moe_init_routing_grad(f(d), f(idx), batch, top_k, row_idx_type=row_idx_type))
    assert got.dtype == torch.float32 and got.shape == (batch, K)
    ref.assert_within(got, ref.scatter_add(d, owner, batch), ref.scatter_add(d.abs(), owner, batch), top_k,
                      what="moe_init_routing_grad")
    got = as_torch(moegrad.grad_x(f(gy), f(w), f(idx), f(gl), batch, top_k, row_idx_type=row_idx_type))
    abs_ref = ref.grad_x(gy.abs(), w.abs(), pos, counts, batch, top_k)
    ref.assert_within(got, ref.grad_x(gy, w, pos, counts, batch, top_k), abs_ref, N + top_k, what="grad_x")
    # Into a NaN-filled out=: every element written, tokens without rows too.
    assert bool((torch.as_tensor(owner).bincount(minlength=batch) == 0).any()), "the case must have such tokens"
    out = f(torch.full((batch, K), float("nan")))
    moegrad.grad_x(f(gy), f(w), f(idx), f(gl), batch, top_k, row_idx_type=row_idx_type, out=out)
    assert torch.equal(as_torch(out).view(torch.int32), got.view(torch.int32))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_nonfused_path_gives_grad_x_bits(dtype):
    """grouped_matmul(grad_y, weight^T) in f32, then the scatter-add: the same
    bits as the fused grad-x (SPEC §5)."""
    batch, top_k, G, K, N = 33, 2, 4, 40, 50
    experts = ref.random_experts(batch, top_k, G)
    _, idx, gl = moegrad.moe_init_routing(rand((batch, 1), dtype), experts, G, active_num=50)
    M = int(gl.sum())
    gy, w = rand((M, N), dtype), rand((G, K, N), dtype)
    d = moegrad.grouped_matmul(gy, w.transpose(1, 2), gl, out_dtype="float32")
    nonfused = moegrad.moe_init_routing_grad(d, idx, batch, top_k)
    fused = moegrad.grad_x(gy, w, idx, gl, batch, top_k)
    assert torch.equal(nonfused, fused)


def test_out_arrays_are_written_in_place():
    M, K, N, G = 12, 4, 6, 3
    counts = np.array([5, 0, 7])
    x = np.random.default_rng(0).standard_normal((M, K)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((G, K, N)).astype(np.float32)
    buffer = np.full((M, N + 2), np.nan, dtype=np.float32)
    y = moegrad.grouped_matmul(x, w, counts, out=buffer[:, 1:N + 1])  # a strided view of a bigger buffer
    assert np.shares_memory(y, buffer)
    assert np.isnan(buffer[:, 0]).all() and np.isnan(buffer[:, -1]).all()
    np.testing.assert_allclose(buffer[:, 1:N + 1], ref.grouped_matmul(x, w, counts).numpy(), rtol=1e-5, atol=1e-5)


def test_readonly_and_noncontiguous_numpy_inputs():
    M, K, N, G = 10, 6, 4, 2
    counts = np.array([4, 6], dtype=np.int32)
    x = np.asfortranarray(np.random.default_rng(2).standard_normal((M, K)).astype(np.float16))
    x.flags.writeable = False
    w = np.random.default_rng(3).standard_normal((G, K, 2 * N)).astype(np.float16)[:, :, ::2]
    y = moegrad.grouped_matmul(x, w, counts, out_dtype="float32")
    xt, wt = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(w))
    ref.assert_within(y, ref.grouped_matmul(xt, wt, counts), ref.grouped_matmul(xt.abs(), wt.abs(), counts), K)


def test_arrays_of_a_kind_moegrad_does_not_read_are_named():
    """A numpy bool array is a bool (the buffer protocol's '?'), not uint8;
    a context of the wrong type is named as such, in one line."""
    gy, w = np.ones((2, 2), np.float32), np.ones((1, 2, 2), np.float32)
    with pytest.raises(moegrad.Error, match="expanded_row_idx: dtype bool must be int32 or int64"):
        moegrad.grad_x(gy, w, np.ones(2, bool), [2], 2, 1)
    out = np.full((2, 2), 7.0, np.float32)
    for context in (4, "scalar"):
        with pytest.raises(TypeError, match=f"^context must be a moegrad.Context or None, got {type(context).__name__}$"):
            moegrad.grad_x(gy, w, np.arange(2), [2], 2, 1, out=out, context=context)
    assert (out == 7.0).all()


def test_gil_is_released_while_computing():
    """This thread sleeps 20 ms while another runs one long call; waking up
    needs the GIL, so it happens early in the call only if the call released
    it (else it waits for the call to end). The call is sized from a timed
    smaller one to last about 0.4 s on this machine, fast or emulated (or
    throttled by a CPU quota, which can hold the sleeper back ~0.1 s)."""
    ctx = moegrad.Context(num_threads=1)
    w = torch.randn(1, 512, 512)

    def operands(rows):
        return torch.randn(rows, 512), torch.tensor([rows]), torch.zeros(rows, 512)  # y's pages touched now

    x, gl, y = operands(2048)
    moegrad._C.grouped_matmul(x, w, gl, y, 0, ctx)  # warm
    begin = time.perf_counter()
    moegrad._C.grouped_matmul(x, w, gl, y, 0, ctx)
    M = min(65536, max(2048, math.ceil(2048 * 0.4 / (time.perf_counter() - begin))))  # at most 256 MiB of x and y
    x, gl, y = operands(M)
    for _ in range(5):
        times = {}

        def work():
            times["begin"] = time.perf_counter()
            moegrad._C.grouped_matmul(x, w, gl, y, 0, ctx)  # the extension itself: no Python code inside
            times["end"] = time.perf_counter()

        worker = threading.Thread(target=work)
        worker.start()
        time.sleep(0.02)
        wake = time.perf_counter()
        worker.join()
        if times["begin"] < wake:  # else the worker had not started yet: try again
            break
    else:  # a machine too loaded to start a thread in 20 ms: the order tells nothing
        pytest.skip("the worker started after the sleeper woke in all 5 tries")
    duration = times["end"] - times["begin"]
    assert duration > 0.06, "the call was too short to tell"
    assert wake - times["begin"] < 0.5 * duration, (wake - times["begin"], duration)


def test_a_new_context_keeps_the_environments_isa_and_threads(monkeypatch):
    monkeypatch.setenv("MOEGRAD_ISA", "scalar")
    monkeypatch.setenv("MOEGRAD_NUM_THREADS", "3")
    context = moegrad.Context()  # isa="auto", num_threads=0: the defaults
    assert (context.isa, context.num_threads) == ("scalar", 3)
    best = [i for i in ("scalar", "avx2", "avx512") if moegrad.isa_available(i)][-1]
    context.isa = "auto"  # set later, auto is the best path the CPU runs
    assert context.isa == best
    # A copy does what its original does: the constructor's "auto" keeps the
    # environment's path, "auto" set later is the best one.
    import copy
    import pickle

    for original, isa in ((moegrad.Context(), "scalar"), (context, best)):
        for twin in (copy.deepcopy(original), pickle.loads(pickle.dumps(original))):
            assert twin.isa == isa


def test_a_malformed_variable_with_any_bytes_raises_moegrad_error(monkeypatch):
    monkeypatch.setenv("MOEGRAD_ENGINE", "fast\udcff")  # the byte 0xff, not UTF-8
    with pytest.raises(moegrad.Error, match=r"MOEGRAD_ENGINE='fast\\xff'") as e:
        moegrad.Context()
    assert e.value.status == "MOEGRAD_STATUS_INVALID_ARGUMENT"


def test_context_settings():
    ctx = moegrad.Context(num_threads=3, isa="scalar")
    assert ctx.num_threads == 3 and ctx.isa == "scalar"
    ctx.num_threads = 1
    assert ctx.num_threads == 1
    with pytest.raises(ValueError):
        moegrad.Context(isa="sse9")
    with pytest.raises(ValueError):
        moegrad.Context(num_threads=-1)
    # A thread count is an integer (not a bool, which Python counts as 1),
    # and one past int32 gets the library's range message, not pybind11's.
    for bad in (True, np.bool_(False), 1.5, "2"):
        with pytest.raises(TypeError, match=f"num_threads must be an integer, got {type(bad).__name__}"):
            moegrad.Context(num_threads=bad)
        with pytest.raises(TypeError, match="num_threads must be an integer"):
            ctx.num_threads = bad
    for big in (2**31, 2**70):
        with pytest.raises(moegrad.Error, match=rf"num_threads={big} is not in \[0, 4096\]") as info:
            moegrad.Context(num_threads=big)
        assert info.value.status == "MOEGRAD_STATUS_INVALID_ARGUMENT"
    assert moegrad.Context(num_threads=np.int64(2)).num_threads == 2
    assert ctx.num_threads == 1
    assert moegrad.isa_available("scalar")
    with pytest.raises(TypeError, match="num_threads must be an integer, got Tensor"):
        moegrad.Context(num_threads=torch.tensor(True))
    previous = moegrad.get_num_threads()
    moegrad.set_num_threads(1)
    assert moegrad.get_num_threads() == 1
    moegrad.set_num_threads(previous)


def test_get_num_threads_reports_the_context_calls_use(monkeypatch):
    """Calls without a context use one made from the environment at first
    use and kept; get_num_threads() must report that one, not read the
    environment again (changed since, or even malformed now)."""
    gy, w = torch.randn(8, 5), torch.randn(2, 3, 5)
    idx, gl = torch.arange(8), torch.tensor([4, 4])
    first = moegrad.grad_x(gy, w, idx, gl, 4, 2)
    threads = moegrad.get_num_threads()
    monkeypatch.setenv("MOEGRAD_NUM_THREADS", str(threads + 1))
    assert moegrad.get_num_threads() == threads
    monkeypatch.setenv("MOEGRAD_NUM_THREADS", "bogus")
    assert moegrad.get_num_threads() == threads
    assert torch.equal(moegrad.grad_x(gy, w, idx, gl, 4, 2), first)


class TaggedContext(moegrad.Context):
    """A subclass a user might make (module level, so pickle can name it)."""


def test_a_context_is_copied_and_pickled_with_its_settings():
    """A module holding a context must survive copy.deepcopy (EMA copies)
    and torch.save; the copy keeps what was asked for, so a default stays
    the default of the machine that loads it."""
    import copy
    import pickle

    ctx = moegrad.Context(num_threads=1, isa="scalar", fast_bf16=True)
    # Every pickle protocol: below 2 the default reduction aborted the process.
    pickled = [pickle.loads(pickle.dumps(ctx, protocol=p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    for twin in (copy.deepcopy(ctx), copy.copy(ctx), *pickled):
        assert (twin.num_threads, twin.isa, twin.fast_bf16) == (1, "scalar", True)
        assert twin is not ctx

    tagged = TaggedContext(num_threads=1)  # a subclass stays one from protocol 2
    tagged.tag = "mine"
    for twin in (copy.deepcopy(tagged), pickle.loads(pickle.dumps(tagged, protocol=2))):
        assert type(twin) is TaggedContext and twin.num_threads == 1
        assert not hasattr(twin, "tag")  # README: only the three settings travel
    below_2 = pickle.loads(pickle.dumps(tagged, protocol=1))
    assert type(below_2) is moegrad.Context and below_2.num_threads == 1
    default = pickle.loads(pickle.dumps(moegrad.Context()))
    assert (default.num_threads, default.isa, default.fast_bf16) == (moegrad.Context().num_threads,
                                                                      moegrad.Context().isa, False)


# fast_bf16 follows the rule of every flag of the package (accumulate's):
# True or False, numpy's, 0 or 1; not whatever Python takes as true.
def test_fast_bf16_takes_a_flag_not_any_truthy_value():
    for value, want in ((True, True), (np.bool_(True), True), (1, True), (False, False), (0, False)):
        assert moegrad.Context(fast_bf16=value).fast_bf16 is want
        ctx = moegrad.Context(fast_bf16=not want)
        ctx.fast_bf16 = value
        assert ctx.fast_bf16 is want
    for bad in (None, 0.5, 2, "False", [True]):
        with pytest.raises(TypeError, match="fast_bf16 must be True or False"):
            moegrad.Context(fast_bf16=bad)
        ctx = moegrad.Context(fast_bf16=True)
        with pytest.raises(TypeError, match="fast_bf16 must be True or False"):
            ctx.fast_bf16 = bad
        assert ctx.fast_bf16 is True


def test_fast_bf16_is_a_context_setting():
    """The fast mode's vdpbf16ps order flushes denormal inputs (README, Fast
    bf16 mode); the exact mode keeps them: the smallest bf16 denormal times
    1.0 tells the two apart. Where the CPU has AVX512_BF16, the hardware
    path gives the scalar emulation's bits."""
    gy = torch.zeros(4, 2, dtype=torch.bfloat16)
    gy.view(torch.int16)[0, 0] = 1  # 2^-133
    w, idx, gl = torch.ones(1, 3, 2, dtype=torch.bfloat16), torch.arange(4), torch.tensor([4])
    exact = moegrad.grad_x(gy, w, idx, gl, 4, 1, context=moegrad.Context(isa="scalar"))
    fast = moegrad.grad_x(gy, w, idx, gl, 4, 1, context=moegrad.Context(isa="scalar", fast_bf16=True))
    assert exact.view(torch.int32)[0].tolist() == [0x00010000] * 3
    assert fast.view(torch.int32)[0].tolist() == [0] * 3
    ctx = moegrad.Context()
    ctx.fast_bf16 = True
    assert ctx.fast_bf16
    if not moegrad.info()["avx512_bf16"]:
        pytest.skip("the rest compares with the AVX512_BF16 hardware, which this CPU lacks")
    batch, top_k, G, K, N = 40, 2, 3, 37, 70
    gy, w = rand((batch * top_k, N), "bfloat16"), rand((G, K, N), "bfloat16")
    idx, gl = torch.randperm(batch * top_k), torch.tensor([30, 0, 50])
    emulated = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(isa="scalar", fast_bf16=True))
    hardware = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(isa="avx512", fast_bf16=True))
    assert torch.equal(emulated.view(torch.int32), hardware.view(torch.int32))
    # Where the two orders part most: bf16 denormal grad_y (read as zero)
    # times weights of 2^100, whose products would be normal f32 values.
    gy = torch.zeros(batch * top_k, N, dtype=torch.bfloat16)
    gy.view(torch.int16)[:] = torch.randint(1, 128, gy.shape, generator=torch.Generator().manual_seed(3))
    w = torch.full((G, K, N), 2.0 ** 100, dtype=torch.bfloat16)
    exact = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(isa="scalar"))
    emulated = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(isa="scalar", fast_bf16=True))
    hardware = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(isa="avx512", fast_bf16=True))
    assert bool(exact.any()) and not bool(emulated.any())
    assert torch.equal(emulated.view(torch.int32), hardware.view(torch.int32))


def test_the_fast_bf16_mode_runs_the_layer_gemms_too():
    """A fast-bf16 context runs grouped_matmul and its weight grad in the
    mode's order too (README, Fast bf16 mode): a bf16 denormal times 1.0 is
    zero there and kept in the exact mode; the weight grad's pairs start at
    each expert's first row; the hardware path gives the emulation's bits;
    f32 inputs keep the exact order."""
    x = torch.zeros(3, 2, dtype=torch.bfloat16)
    x.view(torch.int16)[:, 0] = 1  # 2^-133
    w, gl = torch.ones(2, 2, 3, dtype=torch.bfloat16), torch.tensor([1, 2])
    exact, fast = moegrad.Context(isa="scalar"), moegrad.Context(isa="scalar", fast_bf16=True)
    for ctx, want in ((exact, 0x00010000), (fast, 0)):
        y = moegrad.grouped_matmul(x, w, gl, out_dtype="float32", context=ctx)
        gw = moegrad.grouped_matmul_weight_grad(x, torch.ones(3, 3, dtype=torch.bfloat16), gl, out_dtype="float32",
                                                context=ctx)
        assert y.view(torch.int32).tolist() == [[want] * 3] * 3
        assert gw.view(torch.int32)[:, 0].tolist() == [[want] * 3, [2 * want] * 3]
    # An expert of rows 1..3 after one of row 0: paired from its first row,
    # (1, 2) then (3, pad), its terms add as row 2, row 1, row 3: 1 + 2^-24
    # rounds to 1, and so does 1 + 2^-24 again. Paired from row 0 instead,
    # (0, 1), (2, 3), they would add as row 1, row 3, row 2: 2^-24 + 2^-24
    # first, then 1 + 2^-23, which is exact.
    x = torch.tensor([[1.0], [2.0 ** -24], [1.0], [2.0 ** -24]], dtype=torch.bfloat16)
    gw = moegrad.grouped_matmul_weight_grad(x, torch.ones(4, 1, dtype=torch.bfloat16), torch.tensor([1, 3]),
                                            out_dtype="float32", context=fast)
    assert gw.flatten().tolist() == [1.0, 1.0]
    x32 = torch.rand(3, 2)
    assert torch.equal(moegrad.grouped_matmul(x32, w.float(), gl, context=fast).view(torch.int32),
                       moegrad.grouped_matmul(x32, w.float(), gl, context=exact).view(torch.int32))
    if not moegrad.info()["avx512_bf16"]:
        pytest.skip("the rest compares with the AVX512_BF16 hardware, which this CPU lacks")
    M, K, N = 90, 37, 70
    x, w, gy, gl = rand((M, K), "bfloat16"), rand((3, K, N), "bfloat16"), rand((M, N), "bfloat16"), torch.tensor([31, 0, 59])
    hardware = moegrad.Context(isa="avx512", fast_bf16=True)
    for op, other in ((moegrad.grouped_matmul, w), (moegrad.grouped_matmul_weight_grad, gy)):
        want = op(x, other, gl, out_dtype="float32", context=fast)
        assert torch.equal(op(x, other, gl, out_dtype="float32", context=hardware).view(torch.int32),
                           want.view(torch.int32))
        assert not torch.equal(op(x, other, gl, out_dtype="float32", context=exact).view(torch.int32),
                               want.view(torch.int32))


def test_a_caller_that_flushes_denormals_changes_no_bit():
    """SPEC §5: no flush-to-zero, whatever the caller's thread set (torch's
    set_flush_denormal sets FTZ and DAZ on it, and moegrad's calling thread
    is one of its workers). Products in the f32 denormal range give the
    same bits, denormals included, with the caller flushing."""
    batch, top_k, G, K, N = 16, 2, 3, 24, 40
    gen = torch.Generator().manual_seed(5)
    gy = torch.rand((batch * top_k, N), generator=gen) * 2.0 ** -70
    w = torch.rand((G, K, N), generator=gen) * 2.0 ** -60
    idx, gl = torch.randperm(batch * top_k, generator=gen), torch.tensor([10, 12, 10])
    want = moegrad.grad_x(gy, w, idx, gl, batch, top_k)
    assert bool(((want != 0) & (want.abs() < torch.finfo(torch.float32).tiny)).any()), "no denormal outputs"
    if not torch.set_flush_denormal(True):
        pytest.skip("torch cannot set flush-to-zero on this CPU")
    try:
        flushed = [moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=moegrad.Context(num_threads=t))
                   for t in (1, 3)]
    finally:
        torch.set_flush_denormal(False)
    for got in flushed:
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("context", ["default", "explicit"])
def test_a_forked_child_computes_on_the_parents_contexts(context):
    """multiprocessing's fork start method and DataLoader workers fork after
    the parent has run: the child inherits the contexts but not their worker
    threads, and must still compute, with the parent's bits."""
    batch, top_k, G, K, N = 64, 2, 4, 48, 40
    experts = ref.random_experts(batch, top_k, G)
    _, idx, gl = moegrad.moe_init_routing(rand((batch, 1), "float32"), experts, G)
    gy, w = rand((int(gl.sum()), N), "float32"), rand((G, K, N), "float32")
    ctx = None if context == "default" else moegrad.Context(num_threads=3)
    want = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=ctx).numpy()  # the pool has started
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest code from here on
        status = 1
        try:
            os.close(read)
            signal.alarm(60)  # a hang becomes SIGALRM
            got = moegrad.grad_x(gy, w, idx, gl, batch, top_k, context=ctx).numpy()
            os.write(write, got.tobytes())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the child died of signal {os.WTERMSIG(status)} (14: it hung)"
    assert os.WEXITSTATUS(status) == 0
    assert np.frombuffer(data, dtype=np.float32).tobytes() == want.tobytes()


def test_every_nan_is_the_canonical_nan_on_every_path(monkeypatch):
    """README, 'NaN': NaNs of distinct signs and payloads meet here; every
    ISA, engine and thread count gives the same bits, each NaN stored as
    the one positive quiet NaN with payload zero (numpy's np.nan)."""
    batch, top_k, G, K, N = 24, 2, 3, 20, 33
    experts = ref.random_experts(batch, top_k, G)
    _, idx, gl = moegrad.moe_init_routing(rand((batch, 1), "float32"), experts, G)
    gy, w = rand((int(gl.sum()), N), "float32").numpy(), rand((G, K, N), "float32").numpy()
    payloads = np.array([0x7FC00111, 0xFFC00222, 0x7F800333, 0xFF800444], dtype=np.uint32).view(np.float32)
    gy[3, 5], gy[4, 0], gy[10, 32], w[1, 7, 2], w[2, 0, 0] = payloads[[0, 1, 2, 3, 0]]
    gy[11, :] = payloads[1]
    canonical = np.array(np.nan, dtype=np.float32).view(np.uint32)
    assert canonical == 0x7FC00000
    first = None
    for engine in ("packed", "rowvec"):
        monkeypatch.setenv("MOEGRAD_ENGINE", engine)
        for isa in [i for i in ("scalar", "avx2", "avx512") if moegrad.isa_available(i)]:
            for threads in (1, 2, 3):
                r = moegrad.grad_x(gy, w, idx, gl, batch, top_k,
                                   context=moegrad.Context(num_threads=threads, isa=isa))
                nan = np.isnan(r)
                assert nan.any() and not nan.all()
                assert (r.view(np.uint32)[nan] == canonical).all(), (engine, isa, threads)
                if first is None:
                    first = r
                assert r.tobytes() == first.tobytes(), (engine, isa, threads)

#!/usr/bin/env python3
"""Writes the committed seed corpus of the fuzz targets (deterministic).

    python3 fuzz/make_seed_corpus.py

fuzz/corpus/grad_x/: inputs for fuzz_grad_x, laid out as the decoder in
tests/hardening/kit/grad_x_case.cpp reads them:

  [0] fault (>= 160: structural fault 1 + (b - 160) % 25; the 26th,
      aliasing, is switched on by [18])
  [1] misuse (>= 224: API misuse 1 + (b - 224) % 7, when no fault)
  [2] dtype % 3 (f32, f16, bf16)
  [3] flags: idx int32 | gl int32 | row_idx_type | cumsum | raw contents |
      values (2 bits: small int, small int, uniform, raw bits) | padding rows
  [4..8] batch, top_k, G, N, K     [9..11] keep %, empty %, tail
  [12..16] layouts of grad_y, weight, idx, group_list, grad_x
           (>= 240: raw strides, one byte each follows)
  [17] pad (% 5; >= 0xE0 also: NULL data on the tensors without elements,
  where no fault applies)  [18] pad bytes (% 4; >= 0xE0 also: the aliasing fault, where
  no other fault applies)  [19] isa (% 4; >= 0xC0 also: the fast bf16 mode)
  [20] plan threads (% 4; >= 0xC0 also: the row-vector engine forced,
  >= 0xE0 the packed one)  [21] misalign  [22] workspace fill  [23] grad_x poison
  [24..31] seed
  then raw-content edits, then fault parameters, then aliasing parameters
  (the input: the first with elements from b % 5 on, grad_x skipped; how
  the ranges meet: b % 5).

fuzz/corpus/ops/: inputs for fuzz_ops, laid out as the decoder in
tests/hardening/kit/ops_case.cpp reads them:

  [0] operator % 4 (moe_init_routing, grouped_matmul,
      grouped_matmul_weight_grad, moe_init_routing_grad)
  [1] fault (>= 160: structural fault 1 + (b - 160) % 19)
  [2] misuse (>= 224: API misuse 1 + (b - 224) % 8, when no fault)
  [3] dtype % 3 (f32, f16, bf16); bit 7: a GEMM's output in that dtype, else f32
  [4] index dtypes: int32 expanded_row_idx | int32 group_list | int32 expert_idx
  [5] flags: row_idx_type | cumsum | raw contents | values (2 bits: small
      int, small int, uniform, raw bits) | accumulate | num_rows NULL |
      padding rows
  [6..10] batch (>= 240: 24 * (b - 239)), top_k, G, N, K   [11..13] keep %, empty %, tail
  [14] capacity (>= 128: (b - 128) % 6)  [15] active_num (>= 128: (b - 128) % (slots + 3))
  [16..] one layout byte per tensor (5, 4, 4 or 3; >= 240: raw strides,
         one byte each, follow)
  then pad (% 5; >= 0xE0 also: NULL data on the tensors without elements),
  pad bytes (% 4), output guards (bits 0-1 front, 2-3 back: 0, 8, 32, 64
  bytes; bit 4: data at element 0), isa (% 4; >= 0xC0 also: the fast bf16
  mode), threads (1 + b % 3; bit 7: the first call one-shot, without a
  misuse), misalign, workspace fill, seed (8 bytes)
  then raw-content edits, then fault parameters, then the workspace-overlap
  misuse's parameters.

fuzz/corpus/npy/: .npy files (valid ones of every supported dtype, order,
version and rank, and malformed ones) for fuzz_npy.

Crash regressions are added by hand next to these (crash-*), never
regenerated; this script only (re)writes seed-* files.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FAULTS = 25
MISUSES = 7
PLACEMENTS = 5  # how grad_x and the input meet in the aliasing fault
ISA_BYTES = {"auto": 0, "scalar": 1, "avx2": 2, "avx512": 3}
LAYOUTS = 8  # compact explicit padded reversed swap-inner negative broadcast overlap


def grad_x_case(rng, fault=None, misuse=None, dtype=None, flags=None, dims=None, shape_knobs=None,
                layouts=None, extra=b"", pad=None, pad_bytes=None, isa=None, threads=None):
    """One input; a layout is an int (0..7) or a list [>= 240, raw strides...]."""
    b = bytearray()
    b.append(160 + fault if fault is not None else rng.randrange(160))
    b.append(224 + misuse if misuse is not None else rng.randrange(224))
    b.append(dtype if dtype is not None else rng.randrange(3))
    b.append(flags if flags is not None else rng.randrange(256) & ~0x10)
    b.extend(dims if dims is not None else [rng.randrange(240), rng.randrange(250), rng.randrange(256),
                                            rng.randrange(240), rng.randrange(240)])
    b.extend(shape_knobs if shape_knobs is not None else [rng.randrange(101), rng.randrange(60), rng.randrange(4)])
    for layout in layouts if layouts is not None else [rng.randrange(LAYOUTS) for _ in range(5)]:
        b.extend(layout if isinstance(layout, list) else [layout])
    pad = pad if pad is not None else rng.randrange(5)
    pad_bytes = pad_bytes if pad_bytes is not None else rng.randrange(4)
    isa = isa if isa is not None else rng.randrange(4)
    threads = threads if threads is not None else rng.randrange(4)
    b.extend([pad, pad_bytes, isa, threads, rng.randrange(70), rng.randrange(5), rng.randrange(6)])
    b.extend(struct.pack("<Q", rng.getrandbits(64)))
    b.extend(extra)
    b.extend(rng.getrandbits(8) for _ in range(8))  # parameters for whatever reads next
    return bytes(b)


def raw(rng, rank):
    return [250] + [rng.randrange(15) for _ in range(rank)]  # strides in [-4, 10]


def grad_x_seeds():
    rng = random.Random(20251129)
    seeds = {}
    # Valid calls over dtypes x index types x group-list forms x layouts.
    n = 0
    for dtype in range(3):
        for row_idx_type in range(2):
            for cumsum in range(2):
                flags = (row_idx_type << 2) | (cumsum << 3) | (rng.randrange(4) << 5) | rng.choice([0, 1, 2, 3, 0x80])
                layouts = [(n + i) % 7 for i in range(4)] + [n % 6]
                seeds[f"seed-valid-{n:02d}"] = grad_x_case(rng, fault=None, misuse=None, dtype=dtype, flags=flags,
                                                           layouts=layouts)
                n += 1
    # Several reduction (N > 256) and column (K > 256) blocks: an N byte of
    # 255 decodes to N 265, a K byte of 250 to K 260.
    seeds["seed-valid-big-n"] = grad_x_case(rng, dims=[3, 1, 2, 255, 10])
    seeds["seed-valid-big-k"] = grad_x_case(rng, dims=[2, 1, 3, 5, 250])
    # M = 0 (every slot dropped, no padding rows) and every slot kept.
    seeds["seed-valid-m-zero"] = grad_x_case(rng, flags=0x00, dims=[5, 1, 3, 4, 6], shape_knobs=[0, 0, 0])
    seeds["seed-valid-all-kept"] = grad_x_case(rng, flags=0x80, dims=[7, 3, 2, 9, 33], shape_knobs=[100, 0, 1])
    # Raw strides on every tensor (zero, negative, aliasing inputs; any grad_x).
    for i in range(4):
        seeds[f"seed-raw-strides-{i}"] = grad_x_case(
            rng, layouts=[raw(rng, 2), raw(rng, 3), raw(rng, 1), raw(rng, 1), raw(rng, 2)])
    # grad_x strides {7, 6} on [2, 3]: distinct addresses, interleaved.
    seeds["seed-grad-x-interleaved"] = grad_x_case(rng, dims=[1, 0, 1, 3, 2], layouts=[0, 0, 0, 0, [250, 11, 10]])
    # Raw index / group-list contents: out of range, duplicates, negative and
    # decreasing counts, int32/int64 extremes.
    for i in range(8):
        flags = 0x10 | (i & 3) | ((i >> 2) << 2) | (rng.randrange(2) << 3)
        seeds[f"seed-raw-contents-{i}"] = grad_x_case(rng, flags=flags, extra=bytes(rng.getrandbits(8) for _ in range(24)))
    # One per structural fault and per misuse.
    # Every slot kept (M 8 of batch 4 x top-k 2), so that faults needing
    # more rows than tokens (m-exceeds-slots) apply; index-too-short (18)
    # needs row_idx_type 0, index-too-long (19) type 1. FuzzCorpus tests
    # that each of these files decodes to a fault.
    for f in range(FAULTS):
        flags = rng.randrange(256) & ~0x10
        if f + 1 in (18, 19):
            flags = (flags & ~0x04) | (0x04 if f + 1 == 19 else 0)
        seeds[f"seed-fault-{f + 1:02d}"] = grad_x_case(rng, fault=f, flags=flags, dims=[3, 1, 2, 4, 5],
                                                       shape_knobs=[100, 0, 0])
    for m in range(MISUSES):
        seeds[f"seed-misuse-{m + 1}"] = grad_x_case(rng, misuse=m, flags=rng.randrange(256) & ~0x10)
    # The fast bf16 mode on each ISA byte (avx2 is refused, as is avx512 on a
    # CPU without AVX512_BF16), bf16 mostly, and f32, which ignores it. Raw
    # value bits (denormals, infinities, NaNs, any exponent), where its order
    # shows in the result: small integers, and bf16's uniform values, sum
    # exactly in any order. Most slots kept and a valid grad_x layout, so that
    # most of them compute. FuzzCorpus tests that these decode to fast_bf16=1.
    n = 0
    for dtype in (2, 2, 0):
        for isa in ISA_BYTES.values():
            flags = (rng.randrange(256) & ~0x70) | (3 << 5)
            seeds[f"seed-fast-bf16-{n:02d}"] = grad_x_case(
                rng, fault=None, misuse=None, dtype=dtype, flags=flags, isa=0xC0 | isa,
                shape_knobs=[rng.randrange(60, 101), rng.randrange(30), rng.randrange(4)],
                layouts=[rng.randrange(7) for _ in range(4)] + [rng.randrange(5)])
            n += 1
    # grad_x and an input sharing bytes, each placement on each input, with
    # random layouts (reversed and broadcast inputs put an end of the range
    # away from element 0), some in the fast bf16 mode (the fault is still
    # the status). FuzzCorpus tests that these decode to the fault.
    for placement in range(PLACEMENTS):
        for tensor in range(4):
            seeds[f"seed-aliasing-{placement}{tensor}"] = grad_x_case(
                rng, fault=None, misuse=None, flags=rng.randrange(256) & ~0x10, pad_bytes=0xE0 | rng.randrange(4),
                isa=rng.randrange(4) | rng.choice([0, 0xC0]), extra=bytes([tensor, placement]))
    # Each engine forced on the vector ISAs, 1-4 threads, every dtype, some
    # in the fast bf16 mode; compact layouts mostly, where the default would
    # pick the row-vector engine for these sizes. FuzzCorpus tests that these
    # decode to the engine they are named for, and that no other seed forces
    # one.
    n = 0
    for engine, top in (("packed", 0xE0), ("rowvec", 0xC0)):
        for isa in (ISA_BYTES["avx2"], ISA_BYTES["avx512"], ISA_BYTES["auto"]):
            for dtype in range(3):
                flags = rng.randrange(256) & ~0x10
                seeds[f"seed-engine-{engine}-{n % 9}"] = grad_x_case(
                    rng, fault=None, misuse=None, dtype=dtype, flags=flags,
                    isa=isa | (0xC0 if dtype == 2 and n % 2 else 0), threads=top | (n % 4),
                    shape_knobs=[rng.randrange(50, 101), rng.randrange(30), rng.randrange(4)],
                    layouts=[rng.choice([0, 0, 1, rng.randrange(7)]) for _ in range(4)] + [rng.choice([0, 0, 1, 2])])
                n += 1
    # NULL data on the tensors without elements (DLPack allows it): M = 0
    # (no slot kept, no padding rows), so grad_y is empty, and
    # expanded_row_idx too where it maps expanded rows (row_idx_type 0).
    # FuzzCorpus tests that these decode to null_empty_data=1 and M=0.
    for n in range(6):
        flags = (rng.randrange(256) & ~0x94) | ((n % 2) << 2)
        seeds[f"seed-null-empty-data-{n}"] = grad_x_case(
            rng, fault=None, misuse=None, dtype=n % 3, flags=flags, shape_knobs=[0, rng.randrange(60), 0],
            layouts=[rng.randrange(7) for _ in range(4)] + [rng.randrange(5)], pad=0xE0 | rng.randrange(5),
            isa=rng.randrange(4))
    return seeds


def npy(descr, shape, fortran=False, version=1, data=None, align=64, header_override=None):
    if header_override is not None:
        header = header_override
    else:
        shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False",
                                                                        shape_text)
    len_bytes = 2 if version == 1 else 4
    prefix = 8 + len_bytes
    total = prefix + len(header) + 1
    pad = (-total) % align if align else 0
    header = header + " " * pad + "\n"
    out = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H" if version == 1 else "<I", len(header))
    out += header.encode("latin-1")
    if data is None:
        count = 1
        for d in shape:
            count *= d
        size = {"<f4": 4, "<f2": 2, "<u2": 2, "<i8": 8, "<i4": 4}.get(descr.replace("=", "<").replace("|", "<"), 4)
        data = bytes((i * 37) & 0xFF for i in range(count * size))
    return out + data


def npy_seeds():
    s = {}
    s["seed-f4-2d"] = npy("<f4", (2, 3))
    s["seed-f2-1d"] = npy("<f2", (5,))
    s["seed-u2-3d"] = npy("<u2", (2, 1, 3))
    s["seed-i8-1d"] = npy("<i8", (4,))
    s["seed-i4-1d"] = npy("<i4", (3,))
    s["seed-f4-scalar"] = npy("<f4", ())
    s["seed-f4-empty"] = npy("<f4", (0, 3))
    s["seed-f4-fortran"] = npy("<f4", (3, 2), fortran=True)
    s["seed-f4-fortran-empty"] = npy("<f4", (2, 0, 4), fortran=True)
    s["seed-i8-v2"] = npy("<i8", (2,), version=2)
    s["seed-f4-v3"] = npy("<f4", (1, 2), version=3)
    s["seed-f4-unaligned"] = npy("<f4", (2, 2), align=0)
    s["seed-native-order"] = npy("=f4", (2,))
    s["seed-pipe-order"] = npy("|i4", (2,))
    s["seed-no-order"] = npy("f4", (2,), header_override="{'descr': 'f4', 'fortran_order': False, 'shape': (2,)}")
    s["seed-py2-long"] = npy("<f4", (2, 3), header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }")
    s["seed-key-order"] = npy("<f4", (2,), header_override='{"shape": (2,), "fortran_order": False, "descr": "<f4"}')
    # Malformed.
    s["seed-big-endian"] = npy(">f4", (2,))
    s["seed-bad-descr"] = npy("<f8", (2,))
    s["seed-record-dtype"] = npy("<f4", (2,), header_override="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }")
    s["seed-dup-key"] = npy("<f4", (2,), header_override="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }")
    s["seed-missing-key"] = npy("<f4", (2,), header_override="{'descr': '<f4', 'shape': (2,), }")
    s["seed-shape-no-comma"] = npy("<f4", (2,), header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (2), }")
    s["seed-shape-overflow"] = npy("<f4", (2,), header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }")
    # numpy refuses this too, although it has no elements: the nonzero
    # dimensions are 2^64 elements.
    s["seed-shape-too-big-empty"] = npy("<f4", (0, 4294967296, 4294967296))
    s["seed-dim-too-big"] = npy("<f4", (2,), header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }")
    s["seed-truncated-data"] = npy("<f4", (4, 4))[:-5]
    s["seed-extra-data"] = npy("<f4", (2,)) + b"\x00\x01"
    s["seed-truncated-header"] = npy("<f4", (2,))[:20]
    s["seed-bad-magic"] = b"\x93NUMPZ" + npy("<f4", (2,))[6:]
    s["seed-bad-version"] = b"\x93NUMPY\x04\x00" + npy("<f4", (2,))[8:]
    s["seed-huge-header-len"] = b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{}"
    s["seed-empty"] = b""
    s["seed-escape"] = npy("<f4", (2,), header_override="{'descr': '<f\\4', 'fortran_order': False, 'shape': (2,), }")
    return s


def write(dirname, seeds):
    d = os.path.join(HERE, "corpus", dirname)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.startswith("seed-"):
            os.remove(os.path.join(d, name))
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    print(f"{d}: {len(seeds)} seeds")


OPS = {"routing": 0, "matmul": 1, "wgrad": 2, "scatter": 3}
OP_RANKS = {0: [2, 2, 2, 1, 1], 1: [2, 3, 1, 2], 2: [2, 2, 1, 3], 3: [2, 1, 2]}  # their tensors'
OP_OUTPUTS = {0: [2, 3, 4], 1: [3], 2: [3], 3: [2]}  # which of them are outputs
OP_INDEX_INPUTS = {0: [1], 1: [2], 2: [2], 3: [1]}  # and index inputs
OPS_FAULTS = ["null-args", "null-tensor", "null-shape", "null-data", "rank", "dtype", "lanes", "device",
              "negative-dim", "dim-too-large", "stride-overflow", "misaligned-data", "byte-offset-wrap",
              "dtype-mismatch", "output-dtype", "shape-mismatch", "empty-dim", "attribute", "aliasing"]
OPS_MISUSES = ["null-size-out", "null-executor-out", "null-executor", "workspace-too-small", "null-workspace",
               "workspace-overlap", "run-twice", "wrong-kind"]
# Faults with nothing to break in an operator: the scatter-add has one float
# input (no dtype to mismatch), routing's only float output must be x's dtype.
OPS_FAULT_SKIPS = {("dtype-mismatch", 3), ("output-dtype", 0)}


def ops_case(rng, op, fault=None, misuse=None, dtype=None, index_dtypes=None, flags=None, dims=None, knobs=None,
             layouts=None, pad=None, guards=None, isa=None, threads=None, extra=b""):
    """One input; a layout is an int (0..7) or a list [>= 240, raw strides...]."""
    b = bytearray([op])
    b.append(160 + fault if fault is not None else rng.randrange(160))
    b.append(224 + misuse if misuse is not None else rng.randrange(224))
    b.append(dtype if dtype is not None else rng.randrange(3) | rng.choice([0, 0x80]))
    b.append(index_dtypes if index_dtypes is not None else rng.randrange(8))
    b.append(flags if flags is not None else rng.randrange(256) & ~0x24)  # raw contents, accumulate: asked for
    b.extend(dims if dims is not None else [rng.randrange(240), rng.randrange(250), rng.randrange(240),
                                            rng.randrange(240), rng.randrange(240)])
    b.extend(knobs if knobs is not None else [rng.randrange(60, 101), rng.randrange(40), rng.randrange(4),
                                              rng.randrange(256), rng.randrange(256)])
    if layouts is None:
        # Valid output layouts (compact .. swap-inner); index inputs not
        # broadcast (one value everywhere: duplicates, sums that miss);
        # float inputs any.
        layouts = [rng.randrange(5) if t in OP_OUTPUTS[op] else rng.randrange(6) if t in OP_INDEX_INPUTS[op]
                   else rng.randrange(8) for t in range(len(OP_RANKS[op]))]
    for layout in layouts:
        b.extend(layout if isinstance(layout, list) else [layout])
    b.extend([pad if pad is not None else rng.randrange(5), rng.randrange(4),
              guards if guards is not None else rng.randrange(32), isa if isa is not None else rng.randrange(4),
              threads if threads is not None else rng.randrange(256), rng.randrange(70), rng.randrange(5)])
    b.extend(struct.pack("<Q", rng.getrandbits(64)))
    b.extend(extra)
    b.extend(rng.getrandbits(8) for _ in range(12))  # parameters for whatever reads next
    return bytes(b)


def ops_seeds():
    rng = random.Random(20261208)
    seeds = {}
    # Valid calls of each operator over dtypes, index dtypes, index types,
    # group-list forms, output dtypes, limits and layouts.
    for name, op in OPS.items():
        for n in range(5):
            flags = (n & 1) | ((n >> 1 & 1) << 1) | (rng.randrange(3) << 3) | (rng.randrange(2) << 6) | (0x80 if n % 3 else 0)
            if op == 2 and n == 4:
                flags |= 0x20  # accumulate into an f32 grad_weight
            seeds[f"seed-{name}-valid-{n}"] = ops_case(
                rng, op, fault=None, misuse=None, dtype=(n % 3) | (0x80 if op in (1, 2) and n % 2 and n != 4 else 0),
                flags=flags, knobs=[rng.randrange(60, 101), rng.randrange(30), n % 4,
                                    rng.randrange(128, 256) if n >= 3 else 0, rng.randrange(128, 256) if n == 4 else 0])
    # Past one block: K 260 is two reduction blocks of the forward; one
    # expert of over 256 rows, two of the weight grad's (and of the
    # forward's 240-row tiles); N 265 two column blocks of the weight grad.
    seeds["seed-matmul-valid-big-k"] = ops_case(rng, 1, dims=[3, 1, 1, 3, 250], knobs=[100, 0, 0, 0, 0], flags=0x08)
    seeds["seed-matmul-valid-many-rows"] = ops_case(rng, 1, dims=[250, 0, 0, 2, 3], knobs=[100, 0, 0, 0, 0], flags=0x10)
    seeds["seed-wgrad-valid-many-rows"] = ops_case(rng, 2, dims=[250, 0, 0, 3, 2], knobs=[100, 0, 0, 0, 0], flags=0x10)
    seeds["seed-wgrad-valid-big-n"] = ops_case(rng, 2, dims=[4, 1, 1, 255, 2], knobs=[100, 0, 0, 0, 0], flags=0x08)
    seeds["seed-routing-valid-big-k"] = ops_case(rng, 0, dims=[7, 2, 3, 0, 250], flags=0x18)
    seeds["seed-scatter-valid-big-k"] = ops_case(rng, 3, dims=[6, 2, 2, 0, 255], flags=0x80)
    # Routing that keeps nothing (capacity 0, active_num 0: R = 0) and the
    # raw bits of x's rows (NaN payloads copied as they are).
    seeds["seed-routing-valid-capacity-0"] = ops_case(rng, 0, flags=0x18, knobs=[100, 0, 0, 128, 0])
    seeds["seed-routing-valid-active-num-0"] = ops_case(rng, 0, flags=0x19, knobs=[100, 0, 0, 0, 128])
    # The fast bf16 mode on each ISA byte (avx2 refuses it, and avx512 on a
    # CPU without AVX512_BF16), with raw value bits, where its order shows.
    for name, op in (("matmul", 1), ("wgrad", 2)):
        for isa_name, isa in ISA_BYTES.items():
            seeds[f"seed-{name}-fast-bf16-{isa_name}"] = ops_case(
                rng, op, fault=None, misuse=None, dtype=2 | rng.choice([0, 0x80]), flags=0x18 | rng.randrange(4),
                isa=0xC0 | isa, knobs=[rng.randrange(60, 101), rng.randrange(30), 0, 0, 0])
    # Raw index contents: expert ids, counts, cumsums and expanded_row_idx
    # values out of range, negative, duplicated, sums that miss M.
    for name, op in OPS.items():
        for n in range(2):
            seeds[f"seed-{name}-raw-contents-{n}"] = ops_case(
                rng, op, fault=None, misuse=None, flags=0x04 | n | (rng.randrange(2) << 1),
                extra=bytes(rng.getrandbits(8) for _ in range(36)))
    # Each structural fault on two operators (every operator is hit), and
    # each misuse once. Dimensions of 2 or more and every slot kept, so
    # that a fault needing elements, or a dimension to step, applies.
    # FuzzCorpus tests that each decodes to its fault or misuse.
    for f, fault in enumerate(OPS_FAULTS):
        ops = [op for op in ((2 * f) % 4, (2 * f + 1) % 4) if (fault, op) not in OPS_FAULT_SKIPS]
        if len(ops) < 2:
            ops.append((2 * f + 2) % 4)
        for op in ops:
            name = next(k for k, v in OPS.items() if v == op)
            seeds[f"seed-{name}-fault-{fault}"] = ops_case(
                rng, op, fault=f, misuse=None, dims=[3, 1, 1, 2, 3], knobs=[100, 0, 0, 0, 0], flags=rng.randrange(256) & 0xC3)
    for m, misuse in enumerate(OPS_MISUSES):
        op = m % 4
        name = next(k for k, v in OPS.items() if v == op)
        seeds[f"seed-{name}-misuse-{misuse}"] = ops_case(rng, op, fault=None, misuse=m, knobs=[100, 0, 0, 0, 0],
                                                          flags=rng.randrange(256) & 0xC3)
    # NULL data on the tensors without elements: no row kept (no padding
    # rows), so x and y (or grad_y, grad_expanded_x) are empty; routing with
    # R = 0. FuzzCorpus tests that these decode to null_empty_data=1.
    for name, op in OPS.items():
        seeds[f"seed-{name}-null-empty-data"] = ops_case(
            rng, op, fault=None, misuse=None, flags=0x00, pad=0xE0 | rng.randrange(5),
            knobs=[0, 0, 0, 128 if op == 0 else 0, 0])
    return seeds


if __name__ == "__main__":
    write("grad_x", grad_x_seeds())
    write("ops", ops_seeds())
    write("npy", npy_seeds())

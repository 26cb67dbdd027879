#include "grad_x_case.h"

#include <moegrad/moegrad.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"
#include "skip.h"

namespace mgh {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Reads the input front to back; past the end every byte is 0, so a short
// input is a small, valid case.
class Bytes {
 public:
  Bytes(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(u8()) << (8 * b);
    return v;
  }
  int64_t below(int64_t m) { return m <= 1 ? 0 : static_cast<int64_t>((u8() | (u8() << 8)) % m); }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t i_ = 0;
};

// Structural faults: each breaks exactly one SPEC §4 constraint of an
// otherwise valid call (statuses that another broken constraint also
// explains are listed as acceptable), or, kAliasing, the rule that grad_x
// shares no byte with an input (README, "Errors").
enum class Fault : uint8_t {
  kNone,
  kRank,
  kDtype,
  kDtypeMismatch,
  kLanes,
  kDevice,
  kNMismatch,
  kGroupCountMismatch,
  kEmptyDim,
  kGradXShape,
  kBatch,
  kTopK,
  kRowIdxType,
  kGroupListType,
  kSlotsOverflow,
  kDimTooLarge,
  kStrideOverflow,
  kMExceedsSlots,
  kIndexTooShort,
  kIndexTooLong,
  kNullTensor,
  kNullShape,
  kNullData,
  kNegativeDim,
  kMisalignedData,
  kByteOffsetWrap,
  kAliasing,  // from the pad-bytes byte's top bits (decode_aliasing), not the fault byte
  kCount
};
// The kinds the fault byte picks from: the ones before kAliasing, so that the
// committed corpus decodes as it did before kAliasing was added.
constexpr int kFaultByteKinds = static_cast<int>(Fault::kAliasing) - 1;

const char* fault_name(Fault f) {
  static const char* const names[] = {"none", "rank", "dtype", "dtype-mismatch", "lanes", "device", "n-mismatch",
                                      "group-count-mismatch", "empty-dim", "grad-x-shape", "batch", "top-k",
                                      "row-idx-type", "group-list-type", "slots-overflow", "dim-too-large",
                                      "stride-overflow", "m-exceeds-slots", "index-too-short", "index-too-long",
                                      "null-tensor", "null-shape", "null-data", "negative-dim", "misaligned-data",
                                      "byte-offset-wrap", "aliasing"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(Fault::kCount));
  return names[static_cast<size_t>(f)];
}

// A DLTensor copy the case may edit without touching the problem's storage
// description (room for one extra dimension).
struct TensorView {
  DLTensor t{};
  int64_t shape[4] = {1, 1, 1, 1};
  int64_t strides[4] = {1, 1, 1, 1};  // the effective strides, even when t.strides is NULL
  void copy(const Tensor& from) {
    t = from.dl();
    for (size_t d = 0; d < from.shape().size(); ++d) {
      shape[d] = from.shape()[d];
      strides[d] = from.strides()[d];
    }
    t.shape = shape;
    if (t.strides != nullptr) t.strides = strides;
  }
};

struct Case {
  ProblemSpec spec;
  std::unique_ptr<Problem> problem;
  TensorView view[5];  // grad_y, weight, idx, group_list, grad_x
  moegrad_grad_x_args args{};
  const moegrad_grad_x_args* args_ptr = nullptr;  // NULL for the kNullTensor-on-args case
  Fault fault = Fault::kNone;
  int fault_detail = 0;
  std::vector<moegrad_status> fault_statuses;  // acceptable statuses for the fault
  Misuse misuse = Misuse::kNone;
  bool raw_contents = false;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  int32_t plan_threads = 1;
  const char* engine = nullptr;  // "packed" or "rowvec" forced on the planning context, or the default
  size_t misalign = 0;
  std::vector<uint8_t> ws_fill;
  uint32_t gx_poison = 0;
  bool fast_bf16 = false;            // plan on a context in the fast bf16 mode
  bool aliasing = false;             // make the kAliasing fault if no other applies
  bool null_empty_data = false;      // a valid case's tensors without elements get NULL data
  const char* alias_placement = "";  // kAliasing: how the two ranges meet
};

const char* const kTensorNames[5] = {"grad_y", "weight", "expanded_row_idx", "group_list", "grad_x"};

// SPEC §4 and moegrad.h (BAD_LAYOUT): grad_x's dimensions of more than one
// element, smallest stride first, must each step past the span (stride x
// (shape - 1)) of the smaller ones, so no stride is zero or negative and
// no two elements share an address; a dimension of one element may have
// any stride. Where it does not, BAD_LAYOUT, also for layouts whose
// addresses are distinct but interleave (strides (2, 3) over 3 x 3:
// 0 3 6 2 5 8 4 7 10).
bool grad_x_layout_valid(const std::vector<int64_t>& shape, const std::vector<int64_t>& st) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, shape) of the dimensions that step
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) dims.emplace_back(st[d], shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;  // of the smaller dimensions, in elements (past int64: no stride exceeds it)
  for (const auto& [stride, n] : dims) {
    if (stride <= span) return false;
    int64_t step = 0;
    if (__builtin_mul_overflow(stride, n - 1, &step) || __builtin_add_overflow(span, step, &span))
      span = std::numeric_limits<int64_t>::max();
  }
  return true;
}

std::vector<int64_t> raw_strides(Bytes& in, size_t rank) {
  std::vector<int64_t> s(rank);
  for (auto& x : s) x = static_cast<int64_t>(in.u8() % 15) - 4;  // [-4, 10]
  return s;
}

Layout pick_layout(Bytes& in, bool output, std::vector<int64_t>* strides, size_t rank) {
  const uint8_t b = in.u8();
  if (b >= 240) {
    *strides = raw_strides(in, rank);
    return Layout::kExplicit;
  }
  Layout l = static_cast<Layout>(b % static_cast<uint8_t>(Layout::kCount));
  if (!output && l == Layout::kOverlap) l = Layout::kExplicit;
  if (output && l == Layout::kBroadcast) l = Layout::kPadded;
  return l;
}

void decode_spec(Bytes& in, Case& c) {
  ProblemSpec& s = c.spec;
  const uint8_t fault = in.u8();
  if (fault >= 160) c.fault = static_cast<Fault>(1 + (fault - 160) % kFaultByteKinds);
  const uint8_t misuse = in.u8();
  if (misuse >= 224 && c.fault == Fault::kNone)
    c.misuse = static_cast<Misuse>(1 + (misuse - 224) % (static_cast<int>(Misuse::kCount) - 1));
  const DLDataType dtypes[] = {kF32, kF16, kBF16};
  s.dtype = dtypes[in.u8() % 3];
  const uint8_t flags = in.u8();
  s.idx_dtype = flags & 1 ? kI32 : kI64;
  s.gl_dtype = flags & 2 ? kI32 : kI64;
  s.row_idx_type = (flags >> 2) & 1;
  s.group_list_type = (flags >> 3) & 1;
  c.raw_contents = (flags >> 4) & 1;
  const Values values[] = {Values::kSmallInt, Values::kSmallInt, Values::kUniform, Values::kRawBits};
  s.values = values[(flags >> 5) & 3];
  s.padding_rows = (flags >> 7) & 1;

  const uint8_t batch = in.u8(), top_k = in.u8(), G = in.u8(), N = in.u8(), K = in.u8();
  s.batch = 1 + (batch >= 240 ? batch % 40 : batch % 8);
  s.top_k = 1 + (top_k >= 250 ? top_k % 9 : top_k % 4);
  s.G = 1 + G % 6;
  s.N = N >= 240 ? 250 + N % 20 : 1 + N % 20;  // past 256: several reduction blocks
  s.K = K >= 240 ? 250 + K % 60 : 1 + K % 40;  // past 256: several column blocks
  // Keep one input fast even under ASan: at most ~2^15 multiply-adds.
  while (s.batch * s.top_k * s.N * s.K > (1 << 15)) {
    if (s.N > 20) s.N = 1 + s.N % 20;
    else if (s.K > 40) s.K = 1 + s.K % 40;
    else s.batch = 1 + s.batch % 8;
  }
  s.keep_percent = in.u8() % 101;
  s.empty_percent = in.u8() % 60;
  s.tail = in.u8() % 4;
  s.gy_layout = pick_layout(in, false, &s.gy_strides, 2);
  s.w_layout = pick_layout(in, false, &s.w_strides, 3);
  s.idx_layout = pick_layout(in, false, &s.idx_strides, 1);
  s.gl_layout = pick_layout(in, false, &s.gl_strides, 1);
  s.gx_layout = pick_layout(in, true, &s.gx_strides, 2);
  // Bytes whose low bits pick a value carry a switch in their top bits
  // (these two, the ISA and thread bytes below), so that the seeds written
  // before the switches (top bits clear) decode as they did.
  const uint8_t pad = in.u8();
  s.pad = pad % 5;
  c.null_empty_data = pad >= 0xE0;
  const uint8_t pad_bytes = in.u8();
  s.pad_bytes = (pad_bytes % 4) * 8;
  c.aliasing = pad_bytes >= 0xE0;
  const moegrad_isa isas[] = {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512};
  const uint8_t isa = in.u8();
  c.isa = isas[isa % 4];
  c.fast_bf16 = isa >= 0xC0;
  if (!moegrad_isa_available(c.isa)) c.isa = MOEGRAD_ISA_AUTO;
  // The top bits of the thread byte force an engine (the vector ISAs'
  // choice; the scalar path has one): the fuzzer's small problems would
  // otherwise nearly always get the row-vector engine where grad_y, weight
  // and grad_x are contiguous.
  const uint8_t threads = in.u8();
  c.plan_threads = 1 + threads % 4;
  c.engine = threads >= 0xE0 ? "packed" : threads >= 0xC0 ? "rowvec" : nullptr;
  c.misalign = in.u8() % 70;
  const std::vector<uint8_t> fills[] = {{0x00}, {0xFF}, {0xA5, 0x5A}, {0x01, 0x00, 0xC0, 0x7F}, {0x00, 0x00, 0x80, 0xFF}};
  c.ws_fill = fills[in.u8() % 5];
  // No +0.0: a failed call that zeroed grad_x first would leave it as it was.
  const uint32_t poisons[] = {0x7FC0DEADu, 0xFFFFFFFFu, 0x3F800000u, 0x80000000u, 0x7F800000u, 0x00000001u};
  c.gx_poison = poisons[in.u8() % 6];
  s.seed = in.u64();
}

// Overwrites a few index / group-list entries with values around and far
// outside their valid ranges.
void apply_raw_contents(Bytes& in, Case& c) {
  Problem& p = *c.problem;
  const int64_t slots = c.spec.batch * c.spec.top_k;
  const int edits = 1 + in.u8() % 6;
  for (int e = 0; e < edits; ++e) {
    const bool on_idx = (in.u8() & 1) == 0;
    Tensor& t = on_idx ? p.idx : p.group_list;
    const int64_t len = t.shape()[0];
    if (len == 0) continue;
    const int64_t pos = in.below(len);
    const int64_t limit = on_idx ? (c.spec.row_idx_type == 0 ? slots : p.M) : p.M;
    const bool i32 = t.elem_bytes() == 4;
    const int64_t far_hi = i32 ? std::numeric_limits<int32_t>::max() : kI64Max;
    const int64_t far_lo = i32 ? std::numeric_limits<int32_t>::min() : kI64Min;
    const int64_t choices[] = {-1, -2, 0, limit - 1, limit, limit + 1, far_hi, far_lo,
                               static_cast<int64_t>(in.u8()) - 8};
    t.set_int(t.offset({pos}), choices[in.u8() % 9]);
  }
}

// The view's element offsets (tensor.h), from its own shape and strides.
Extent view_extent(const TensorView& v) {
  return extent_of(std::vector<int64_t>(v.shape, v.shape + v.t.ndim),
                   std::vector<int64_t>(v.strides, v.strides + v.t.ndim));
}

bool view_has_elements(const TensorView& v) { return !view_extent(v).empty; }

// Picks the tensor (0..4) a fault applies to, among those where `ok` holds.
template <typename Pred>
int pick_tensor(Bytes& in, Pred ok) {
  const int start = in.u8() % 5;
  for (int i = 0; i < 5; ++i)
    if (ok((start + i) % 5)) return (start + i) % 5;
  return -1;
}

int expected_rank(int t) { return t == 1 ? 3 : (t == 2 || t == 3) ? 1 : 2; }

// Applies c.fault to the views; returns false if it cannot apply to this
// shape (the case then runs without a fault).
bool apply_fault(Bytes& in, Case& c) {
  auto& v = c.view;
  auto& a = c.args;
  const Problem& p = *c.problem;
  const int64_t M = p.M, N = c.spec.N, K = c.spec.K, G = c.spec.G, B = c.spec.batch, T = c.spec.top_k;
  const int64_t slots = B * T;
  auto expect = [&](std::initializer_list<moegrad_status> s) { c.fault_statuses.assign(s); };
  auto has_elements = [&](int i) { return view_has_elements(v[i]); };
  switch (c.fault) {
    case Fault::kNone:
    case Fault::kAliasing:  // never from the fault byte: decode_aliasing sets it later
    case Fault::kCount:
      return true;
    case Fault::kRank: {
      const int t = pick_tensor(in, [](int) { return true; });
      const int32_t ranks[] = {0, 1, 2, 3, 4, -1, 100};
      int32_t r = ranks[in.u8() % 7];
      if (r == expected_rank(t)) r = expected_rank(t) + 1;
      v[t].t.ndim = r;
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_BAD_RANK});
      return true;
    }
    case Fault::kDtype: {
      const int t = pick_tensor(in, [](int) { return true; });
      const DLDataType bad_float[] = {{kDLFloat, 64, 1}, {kDLInt, 32, 1}, {kDLFloat, 8, 1}, {kDLBfloat, 32, 1},
                                      {kDLUInt, 16, 1}, {kDLFloat, 0, 1}, {kDLComplex, 64, 1}};
      const DLDataType bad_index[] = {{kDLFloat, 32, 1}, {kDLUInt, 64, 1}, {kDLInt, 16, 1}, {kDLInt, 8, 1},
                                      {kDLUInt, 32, 1}, {kDLInt, 0, 1}, {kDLFloat, 64, 1}};
      const DLDataType bad_grad_x[] = {kF16, kBF16, {kDLFloat, 64, 1}, kI32, {kDLUInt, 32, 1}, {kDLFloat, 0, 1},
                                       {kDLBfloat, 32, 1}};
      const DLDataType d = (t == 2 || t == 3) ? bad_index[in.u8() % 7]
                           : t == 4           ? bad_grad_x[in.u8() % 7]
                                              : bad_float[in.u8() % 7];
      v[t].t.dtype = d;
      if (t == 0 || t == 1) v[1 - t].t.dtype = d;  // both inputs: not a mere mismatch
      c.fault_detail = t;
      // None of these types is one that tensor may have, so a data pointer
      // unaligned for its element is no second error: the dtype is the one
      // rule broken.
      expect({MOEGRAD_STATUS_BAD_DTYPE});
      return true;
    }
    case Fault::kDtypeMismatch: {
      // A dtype no wider than the stored one, so alignment still holds.
      const DLDataType w = v[1].t.dtype;
      v[1].t.dtype = same_dtype(w, kF32) ? (in.u8() & 1 ? kF16 : kBF16) : same_dtype(w, kF16) ? kBF16 : kF16;
      expect({MOEGRAD_STATUS_DTYPE_MISMATCH});
      return true;
    }
    case Fault::kLanes: {
      const int t = pick_tensor(in, [](int) { return true; });
      v[t].t.dtype.lanes = static_cast<uint16_t>(2 + in.u8() % 7);
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    }
    case Fault::kDevice: {
      const int t = pick_tensor(in, [](int) { return true; });
      const DLDeviceType devs[] = {kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLROCM};
      v[t].t.device.device_type = devs[in.u8() % 5];
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_UNSUPPORTED_DEVICE});
      return true;
    }
    case Fault::kNMismatch:
      if (in.u8() & 1) v[1].shape[2] = N + 1 + in.u8() % 3;
      else v[0].shape[1] = N + 1 + in.u8() % 3;
      expect({MOEGRAD_STATUS_N_MISMATCH});
      return true;
    case Fault::kGroupCountMismatch:
      v[3].shape[0] = G + 1 + in.u8() % 3;
      expect({MOEGRAD_STATUS_GROUP_COUNT_MISMATCH});
      return true;
    case Fault::kEmptyDim:
      switch (in.u8() % 3) {
        case 0: v[0].shape[1] = 0; v[1].shape[2] = 0; break;   // N = 0
        case 1: v[1].shape[1] = 0; v[4].shape[1] = 0; break;   // K = 0
        default: v[1].shape[0] = 0; v[3].shape[0] = 0; break;  // G = 0
      }
      expect({MOEGRAD_STATUS_EMPTY_DIMENSION});
      return true;
    case Fault::kGradXShape:
      if (in.u8() & 1) v[4].shape[0] = B + 1 + in.u8() % 3;
      else v[4].shape[1] = K + 1 + in.u8() % 3;
      expect({MOEGRAD_STATUS_GRAD_X_SHAPE});
      return true;
    case Fault::kBatch: {
      const int64_t bad[] = {0, -1, kI64Min};
      a.batch = bad[in.u8() % 3];
      // grad_x still has the old batch rows, and batch*top_k <= 0 < M;
      // the product overflows only for INT64_MIN times a top_k of 2 or more.
      expect({MOEGRAD_STATUS_BAD_BATCH, MOEGRAD_STATUS_GRAD_X_SHAPE, MOEGRAD_STATUS_M_EXCEEDS_SLOTS,
              MOEGRAD_STATUS_INDEX_TOO_LONG});
      if (int64_t slots = 0; __builtin_mul_overflow(a.batch, a.top_k, &slots))
        c.fault_statuses.push_back(MOEGRAD_STATUS_SIZE_OVERFLOW);
      return true;
    }
    case Fault::kTopK: {
      const int64_t bad[] = {0, -1, kI64Min};
      a.top_k = bad[in.u8() % 3];
      expect({MOEGRAD_STATUS_BAD_TOP_K, MOEGRAD_STATUS_M_EXCEEDS_SLOTS, MOEGRAD_STATUS_INDEX_TOO_LONG});
      if (int64_t slots = 0; __builtin_mul_overflow(a.batch, a.top_k, &slots))
        c.fault_statuses.push_back(MOEGRAD_STATUS_SIZE_OVERFLOW);
      return true;
    }
    case Fault::kRowIdxType: {
      const int32_t bad[] = {2, -1, std::numeric_limits<int32_t>::min(), 255};
      a.row_idx_type = bad[in.u8() % 4];
      expect({MOEGRAD_STATUS_BAD_ROW_IDX_TYPE});
      return true;
    }
    case Fault::kGroupListType: {
      const int32_t bad[] = {2, -1, std::numeric_limits<int32_t>::max(), 7};
      a.group_list_type = bad[in.u8() % 4];
      expect({MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE});
      return true;
    }
    case Fault::kSlotsOverflow:
      if (B < 2) return false;
      a.top_k = kI64Max / B + 1 + in.u8() % 3;
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    case Fault::kDimTooLarge: {
      const int t = pick_tensor(in, [](int) { return true; });
      const int d = static_cast<int>(in.u8() % static_cast<unsigned>(expected_rank(t)));
      const int64_t big[] = {int64_t{1} << 31, kI64Max, int64_t{1} << 40};
      v[t].shape[d] = big[in.u8() % 3];
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
    case Fault::kStrideOverflow: {
      // A dimension with >= 2 elements (and a non-empty tensor) gets a stride
      // whose byte span cannot be represented.
      const int t = pick_tensor(in, [&](int i) {
        int64_t n = 1;
        for (int d = 0; d < v[i].t.ndim; ++d) n *= v[i].shape[d];
        return n >= 2;
      });
      if (t < 0) return false;
      int d = 0;
      while (v[t].shape[d] < 2) ++d;
      v[t].t.strides = v[t].strides;
      v[t].strides[d] = in.u8() & 1 ? kI64Max : kI64Min;
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
    case Fault::kMExceedsSlots: {
      if (M <= B) return false;
      a.top_k = (M - 1) / B;  // >= 1, and batch*top_k < M
      // A row_idx_type 1 index of more than the new batch*top_k elements
      // breaks §4.7's other rule too.
      if (c.spec.row_idx_type == 1 && v[2].shape[0] > B * a.top_k)
        expect({MOEGRAD_STATUS_M_EXCEEDS_SLOTS, MOEGRAD_STATUS_INDEX_TOO_LONG});
      else
        expect({MOEGRAD_STATUS_M_EXCEEDS_SLOTS});
      return true;
    }
    case Fault::kIndexTooShort:
      if (c.spec.row_idx_type != 0 || M == 0) return false;
      v[2].shape[0] = M - 1 - in.below(M);
      expect({MOEGRAD_STATUS_INDEX_TOO_SHORT});
      return true;
    case Fault::kIndexTooLong:
      if (c.spec.row_idx_type != 1) return false;
      v[2].shape[0] = slots + 1 + in.u8() % 3;
      expect({MOEGRAD_STATUS_INDEX_TOO_LONG});
      return true;
    case Fault::kNullTensor: {
      const int t = in.u8() % 6;
      if (t == 5) {
        c.args_ptr = nullptr;
      } else {
        const DLTensor** slots_[] = {&a.grad_y, &a.weight, &a.expanded_row_idx, &a.group_list, &a.grad_x};
        *slots_[t] = nullptr;
      }
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    }
    case Fault::kNullShape: {
      const int t = pick_tensor(in, [](int) { return true; });
      v[t].t.shape = nullptr;
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    }
    case Fault::kNullData: {
      // NULL data is allowed only for a tensor without elements.
      const int t = pick_tensor(in, has_elements);
      if (t < 0) return false;
      v[t].t.data = nullptr;
      v[t].t.byte_offset = 0;
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    }
    case Fault::kNegativeDim: {
      const int t = pick_tensor(in, [](int) { return true; });
      const int d = static_cast<int>(in.u8() % static_cast<unsigned>(expected_rank(t)));
      v[t].shape[d] = in.u8() & 1 ? -1 : kI64Min;
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    }
    case Fault::kMisalignedData: {
      const int t = pick_tensor(in, has_elements);
      if (t < 0) return false;
      const int eb = v[t].t.dtype.bits / 8;
      v[t].t.byte_offset += 1 + in.u8() % static_cast<unsigned>(eb - 1);
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    }
    case Fault::kByteOffsetWrap: {
      // byte_offset is unsigned: 2^64 - x is a "negative" offset that makes
      // data + byte_offset wrap around to before the buffer, and must be
      // refused (even for an empty tensor: it is no offset at all). A large
      // offset that does not wrap is just a bad pointer, which no library
      // can detect, so it is not a fault here.
      const int t = pick_tensor(in, [](int) { return true; });
      const int eb = (v[t].t.dtype.bits + 7) / 8;
      const uint64_t back = static_cast<uint64_t>(eb) * (1 + in.u8() % 4);
      v[t].t.byte_offset = uint64_t{0} - back;  // data - back (mod 2^64), still aligned
      c.fault_detail = t;
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
  }
  return false;
}

// First and last byte of a view's elements (a view with elements).
struct ByteRange {
  uintptr_t lo, hi;
};
ByteRange byte_range(const TensorView& v) {
  const Extent e = view_extent(v);
  const auto elem = static_cast<int64_t>((v.t.dtype.bits + 7) / 8);
  const uintptr_t first = reinterpret_cast<uintptr_t>(v.t.data) + v.t.byte_offset;
  return {first + static_cast<uintptr_t>(e.min_offset * elem),
          first + static_cast<uintptr_t>(e.max_offset * elem + elem - 1)};
}

// Moves a view (data = its element 0, byte_offset 0) so that its first byte
// is at `lo`, which must be aligned for its elements.
void move_first_byte_to(TensorView& v, uintptr_t lo) {
  const ByteRange r = byte_range(v);
  const uintptr_t element0 = reinterpret_cast<uintptr_t>(v.t.data) + v.t.byte_offset;
  v.t.data = reinterpret_cast<void*>(lo + (element0 - r.lo));
  v.t.byte_offset = 0;
}

uintptr_t align_down(uintptr_t p, uintptr_t a) { return p - p % a; }

// The aliasing fault: grad_x is moved onto an input, or an input onto
// grad_x, so that their address ranges share at least one byte, the
// alignment of both kept and every other constraint still met. Each
// placement puts an end of one range on an end of the other, so a range the
// library computed one element short, or from element 0 where strides
// reverse it, would let the call through. The pointers may point outside
// any allocation: a library that accepted the call would read or write
// there, which ASan reports.
void decode_aliasing(Bytes& in, Case& c) {
  if (!c.aliasing || c.fault != Fault::kNone || fuzz_skip(fault_name(Fault::kAliasing))) return;
  // An input with elements (the weight always has some).
  const int t = pick_tensor(in, [&](int i) { return i != 4 && view_has_elements(c.view[i]); });
  TensorView& gx = c.view[4];
  TensorView& input = c.view[t];
  const ByteRange g = byte_range(gx), r = byte_range(input);
  const uintptr_t g_bytes = g.hi - g.lo + 1, r_bytes = r.hi - r.lo + 1;  // multiples of the element sizes
  const uintptr_t r_elem = static_cast<uintptr_t>(input.t.dtype.bits / 8);
  switch (in.u8() % 5) {
    case 0:  // grad_x starts in the input's first 4 bytes
      move_first_byte_to(gx, align_down(r.lo, 4));
      c.alias_placement = "grad_x-first-on-input-first";
      break;
    case 1:  // grad_x's last element holds the input's first byte
      move_first_byte_to(gx, align_down(r.lo, 4) + 4 - g_bytes);
      c.alias_placement = "grad_x-last-on-input-first";
      break;
    case 2:  // grad_x's first element holds the input's last byte
      move_first_byte_to(gx, align_down(r.hi, 4));
      c.alias_placement = "grad_x-first-on-input-last";
      break;
    case 3:  // the input's first element holds grad_x's first byte
      move_first_byte_to(input, align_down(g.lo, r_elem));
      c.alias_placement = "input-first-on-grad_x-first";
      break;
    default:  // the input's last element holds grad_x's last byte
      move_first_byte_to(input, align_down(g.hi, r_elem) + r_elem - r_bytes);
      c.alias_placement = "input-last-on-grad_x-last";
      break;
  }
  c.fault = Fault::kAliasing;
  c.fault_detail = t;
  c.fault_statuses = {MOEGRAD_STATUS_ALIASING};
}

void decode(const uint8_t* data, size_t size, Case& c) {
  Bytes in(data, size);
  decode_spec(in, c);
  if (fuzz_skip(fault_name(c.fault))) c.fault = Fault::kNone;
  c.problem = std::make_unique<Problem>(c.spec);
  if (c.raw_contents) apply_raw_contents(in, c);
  Problem& p = *c.problem;
  const Tensor* src[] = {&p.grad_y, &p.weight, &p.idx, &p.group_list, &p.grad_x};
  for (int t = 0; t < 5; ++t) c.view[t].copy(*src[t]);
  c.args = p.args();
  c.args.grad_y = &c.view[0].t;
  c.args.weight = &c.view[1].t;
  c.args.expanded_row_idx = &c.view[2].t;
  c.args.group_list = &c.view[3].t;
  c.args.grad_x = &c.view[4].t;
  c.args_ptr = &c.args;
  if (!apply_fault(in, c)) c.fault = Fault::kNone;
  decode_aliasing(in, c);
  // A tensor without elements may have NULL data (moegrad.h, at
  // moegrad_grad_x_args), e.g. grad_y and expanded_row_idx where no row
  // is kept.
  if (c.null_empty_data && c.fault == Fault::kNone)
    for (TensorView& v : c.view)
      if (!view_has_elements(v)) v.t.data = nullptr, v.t.byte_offset = 0;
  c.problem->grad_x.fill_words(c.gx_poison);
}

std::string describe_case(const Case& c) {
  std::string s = c.spec.describe() + " M=" + std::to_string(c.problem->M) + " L=" + std::to_string(c.problem->L) +
                  " fault=" + fault_name(c.fault);
  if (c.fault != Fault::kNone) {
    s += '(';
    s += std::to_string(c.fault_detail);
    if (c.fault == Fault::kAliasing) {
      s += ' ';
      s += c.alias_placement;
    }
    s += ')';
  }
  s += std::string(" misuse=") + misuse_name(c.misuse) + " raw_contents=" + (c.raw_contents ? "1" : "0") +
       " isa=" + moegrad_isa_name(c.isa) + " engine=" + (c.engine != nullptr ? c.engine : "default") +
       " plan_threads=" + std::to_string(c.plan_threads) +
       " misalign=" + std::to_string(c.misalign) + " fast_bf16=" + (c.fast_bf16 ? "1" : "0") +
       (c.null_empty_data ? " null_empty_data=1" : "");
  return s;
}

bool contains(const std::vector<moegrad_status>& v, moegrad_status s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string statuses_string(const std::vector<moegrad_status>& v) {
  std::string s;
  for (moegrad_status x : v) s += (s.empty() ? "" : " | ") + std::string(moegrad_status_string(x));
  return s.empty() ? "MOEGRAD_STATUS_SUCCESS" : s;
}

// This CPU has AVX512_BF16 (and the AVX-512 subsets the library's check
// asks for with it), read from the compiler's CPUID model, not the library.
bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

// moegrad.h, moegrad_context_set_fast_bf16: a bf16 problem planned in the
// fast mode needs the context's ISA to be scalar (the emulation) or avx512
// on a CPU with AVX512_BF16. f32 and f16 problems ignore the mode.
bool fast_bf16_refused(const Case& c, const moegrad_context* plan_ctx) {
  if (!c.fast_bf16 || !same_dtype(c.spec.dtype, kBF16)) return false;
  moegrad_isa isa = MOEGRAD_ISA_AUTO;
  if (moegrad_context_get_isa(plan_ctx, &isa) != MOEGRAD_STATUS_SUCCESS) return true;
  if (isa == MOEGRAD_ISA_SCALAR) return false;
  return !(isa == MOEGRAD_ISA_AVX512 && cpu_has_avx512bf16());
}

// The statuses a correct implementation may return for this case, in the
// order the SPEC's phases imply: NULL out-pointers, then the structural
// fault or grad_x layout (planning), then a fast bf16 mode the plan's ISA
// cannot run (planning, once the dtype it depends on is valid), then
// run-time misuse, then contents.
std::vector<moegrad_status> expected_statuses(const Case& c, bool fast_refused, bool* may_succeed) {
  *may_succeed = false;
  if (c.misuse == Misuse::kNullArgs || c.misuse == Misuse::kNullSizeOut || c.misuse == Misuse::kNullExecutorOut)
    return {misuse_status(c.misuse)};
  const bool layout_valid = grad_x_layout_valid(c.problem->grad_x.shape(), c.problem->grad_x.strides());
  if (c.fault != Fault::kNone) {
    std::vector<moegrad_status> out = c.fault_statuses;
    if (!layout_valid) out.push_back(MOEGRAD_STATUS_BAD_LAYOUT);  // a second broken constraint
    return out;
  }
  if (!layout_valid) return {MOEGRAD_STATUS_BAD_LAYOUT};
  if (fast_refused) return {MOEGRAD_STATUS_ISA_UNAVAILABLE};
  std::vector<moegrad_status> out;
  if (c.misuse != Misuse::kNone && c.misuse != Misuse::kRunTwice) {
    out = {misuse_status(c.misuse)};
  } else {
    out = content_violations(c.args);  // kRunTwice: the first run then fails on them
    *may_succeed = out.empty();
  }
  return out;
}

// The grad_x storage between/around its elements, and the input storages,
// must be as they were.
std::string check_untouched(const Case& c, const std::vector<std::byte> before[5], bool grad_x_elements_too) {
  const Problem& p = *c.problem;
  const Tensor* t[] = {&p.grad_y, &p.weight, &p.idx, &p.group_list, &p.grad_x};
  for (int i = 0; i < 4; ++i)
    if (t[i]->snapshot() != before[i]) return std::string("input ") + kTensorNames[i] + " was modified";
  const std::vector<std::byte> now = p.grad_x.snapshot();
  if (grad_x_elements_too) {
    if (now != before[4]) return "grad_x was written by a failed call";
    return "";
  }
  // Only the elements may change: restore them from `now` into a copy of
  // `before` and compare.
  std::vector<std::byte> expect = before[4];
  const auto base = reinterpret_cast<uintptr_t>(p.grad_x.storage());
  for (int64_t e = 0; e < p.grad_x.numel(); ++e) {
    const auto addr = reinterpret_cast<uintptr_t>(static_cast<const std::byte*>(p.grad_x.dl().data) +
                                                  p.grad_x.dl().byte_offset) +
                      static_cast<uintptr_t>(p.grad_x.offset_of_linear(e) * 4);
    std::memcpy(&expect[addr - base], &now[addr - base], 4);
  }
  if (now != expect) return "grad_x storage outside its elements was written";
  return "";
}

// MXCSR's control bits (rounding, FTZ, DAZ, exception masks), not its
// sticky flags: a call must leave them as it found them, or the references
// computed after it (std::fma on this thread) would round as it left them.
unsigned mxcsr_controls() { return _mm_getcsr() & ~0x3Fu; }

std::string check_case(Case& c) {
  Problem& p = *c.problem;
  const Tensor* t[] = {&p.grad_y, &p.weight, &p.idx, &p.group_list, &p.grad_x};
  std::vector<std::byte> before[5];
  for (int i = 0; i < 5; ++i) before[i] = t[i]->snapshot();
  const unsigned mxcsr = mxcsr_controls();

  RunOptions opt;
  opt.plan_ctx = shared_context(c.isa, c.plan_threads, c.fast_bf16, c.engine);
  opt.run_ctx = shared_context(MOEGRAD_ISA_AUTO, 1);  // one thread: a deterministic schedule for the fuzzer
  opt.misalign = c.misalign;
  opt.ws_fill = c.ws_fill;
  opt.misuse = c.misuse;
  const RunResult r = run_grad_x(c.args_ptr, opt);
  if (mxcsr_controls() != mxcsr) return "the call changed MXCSR's controls: " + describe_case(c);

  bool may_succeed = false;
  const std::vector<moegrad_status> expected =
      expected_statuses(c, fast_bf16_refused(c, opt.plan_ctx), &may_succeed);
  const bool success_ok = may_succeed || contains(expected, MOEGRAD_STATUS_SUCCESS);
  const std::string what = describe_case(c) + ": got " + r.describe();

  // A run-twice misuse: the second run must fail with EXECUTOR_USED and leave
  // the first run's (checked below) result in place.
  const bool wrote = r.ok() || (c.misuse == Misuse::kRunTwice && r.first_run_ok);
  if (c.misuse == Misuse::kRunTwice && r.first_run_ok && r.status != MOEGRAD_STATUS_EXECUTOR_USED)
    return "second run of an executor: " + what;

  if (!wrote) {
    if (r.ok() || !(contains(expected, r.status)))
      return "unexpected status, want " + statuses_string(expected) + "; " + what;
    if (r.message.empty() || r.message.find('\n') != std::string::npos)
      return "failure message must be one non-empty line: " + what;
    if (std::string u = check_untouched(c, before, true); !u.empty()) return u + ": " + what;
    return "";
  }
  if (!success_ok) return "call succeeded, want " + statuses_string(expected) + "; " + what;

  // Success: the bits of SPEC §5.
  if (std::string u = check_untouched(c, before, false); !u.empty()) return u + ": " + what;
  const std::vector<float> got = read_grad_x(p.grad_x.dl());
  const int64_t K = c.spec.K;
  const bool pairs = c.fast_bf16 && same_dtype(c.spec.dtype, kBF16);
  if (std::string d = compare_bits(got, pairs ? reference_fast_bf16(c.args) : reference_contract(c.args), K);
      !d.empty())
    return (pairs ? "result != the fast bf16 mode's pair order: " : "result != SPEC §5 f32 order: ") + d + "; " +
           what;
  if (c.spec.values == Values::kSmallInt) {
    if (std::string d = compare_bits(got, to_float(reference_f64(c.args)), K); !d.empty())
      return "result != float64 reference (exact for small integers): " + d + "; " + what;
  }
  // Again on the scalar path (in the fast bf16 mode: its emulation, which
  // the hardware path must match bit for bit), other threads, workspace,
  // misalignment and poison.
  // This run has as many threads as its plan was made for: the first runs
  // on one, so without this no worker's region past the first, and no
  // hand-out of items among workers, would ever run under the fuzzer (which
  // then gains coverage from pool threads, in an order that can vary).
  p.grad_x.fill_words(c.gx_poison ^ 0x5A5A5A5Au);
  RunOptions again;
  const int32_t again_threads = 1 + c.plan_threads % 3;
  again.plan_ctx = shared_context(MOEGRAD_ISA_SCALAR, again_threads, c.fast_bf16);
  again.run_ctx = shared_context(MOEGRAD_ISA_AUTO, again_threads);
  again.misalign = (c.misalign + 17) % 64;
  again.ws_fill = {0x3C, 0xFF, 0x00};
  const RunResult r2 = run_grad_x(&c.args, again);
  if (!r2.ok()) return "scalar rerun failed: " + r2.describe() + "; " + what;
  if (std::string d = compare_bits(read_grad_x(p.grad_x.dl()), got, K); !d.empty())
    return "scalar path differs: " + d + "; " + what;
  // And on the planned path with the threads it was planned for: the scalar
  // rerun above is the only other multithreaded run, so without this the
  // vector paths' workers past the first (their workspace regions, the
  // row-vector engine's hand-out of items) would never run under the fuzzer.
  if (c.plan_threads > 1) {
    p.grad_x.fill_words(c.gx_poison ^ 0xA5A5A5A5u);
    RunOptions threaded;
    threaded.plan_ctx = opt.plan_ctx;
    threaded.run_ctx = shared_context(MOEGRAD_ISA_AUTO, c.plan_threads);
    threaded.misalign = (c.misalign + 33) % 64;
    threaded.ws_fill = {0xC3};
    const RunResult r3 = run_grad_x(&c.args, threaded);
    if (!r3.ok()) return "rerun on " + std::to_string(c.plan_threads) + " threads failed: " + r3.describe() + "; " + what;
    if (std::string d = compare_bits(read_grad_x(p.grad_x.dl()), got, K); !d.empty())
      return "the planned path on " + std::to_string(c.plan_threads) + " threads differs: " + d + "; " + what;
  } else {
    // One thread: the planned path once more through the one-shot call
    // (moegrad_grad_x_run plans, takes its own workspace and runs), which
    // no other run takes.
    p.grad_x.fill_words(c.gx_poison ^ 0xA5A5A5A5u);
    const moegrad_status s = moegrad_grad_x_run(&c.args, opt.plan_ctx);
    if (s != MOEGRAD_STATUS_SUCCESS)
      return std::string("one-shot rerun failed: ") + moegrad_status_string(s) + " (\"" + moegrad_last_error_message() +
             "\"); " + what;
    if (std::string d = compare_bits(read_grad_x(p.grad_x.dl()), got, K); !d.empty())
      return "the one-shot call differs: " + d + "; " + what;
  }
  if (mxcsr_controls() != mxcsr) return "a rerun changed MXCSR's controls: " + what;
  return "";
}

}  // namespace

void prepare_grad_x_contexts() {
  for (moegrad_isa isa : {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (!moegrad_isa_available(isa)) continue;
    for (int32_t threads = 1; threads <= 4; ++threads)
      for (bool fast_bf16 : {false, true})
        for (const char* engine : {static_cast<const char*>(nullptr), "packed", "rowvec"})
          shared_context(isa, threads, fast_bf16, engine);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // pool threads reach their wait
}

std::string check_grad_x_input(const uint8_t* data, size_t size) {
  Case c;
  decode(data, size, c);
  return check_case(c);
}

std::string describe_grad_x_input(const uint8_t* data, size_t size) {
  Case c;
  decode(data, size, c);
  return describe_case(c);
}

}  // namespace mgh

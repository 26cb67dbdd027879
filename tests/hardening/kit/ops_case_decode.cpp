#include "ops_case_decode.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "ops_reference.h"
#include "skip.h"

namespace mgh::ops {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();

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

// Structural faults: each breaks one rule of moegrad_layer.h in an
// otherwise valid call (statuses that another rule the fault also breaks
// explains are listed as acceptable). Those marked "per operator" pick one

// The tensors of each operator, in moegrad_layer.h's args order.
constexpr SlotSpec kSlotSpecs[4][kMaxSlots] = {
    {{"x", Role::kFloatIn, 2}, {"expert_idx", Role::kIndexIn, 2}, {"expanded_x", Role::kFloatOut, 2},
     {"expanded_row_idx", Role::kIndexOut, 1}, {"group_list", Role::kIndexOut, 1}},
    {{"x", Role::kFloatIn, 2}, {"weight", Role::kFloatIn, 3}, {"group_list", Role::kIndexIn, 1},
     {"y", Role::kFloatOut, 2}, {}},
    {{"x", Role::kFloatIn, 2}, {"grad_y", Role::kFloatIn, 2}, {"group_list", Role::kIndexIn, 1},
     {"grad_weight", Role::kFloatOut, 3}, {}},
    {{"grad_expanded_x", Role::kFloatIn, 2}, {"expanded_row_idx", Role::kIndexIn, 1}, {"grad_x", Role::kFloatOut, 2},
     {}, {}},
};
constexpr int kSlotCount[4] = {5, 4, 4, 3};

std::vector<int64_t> random_strides(Bytes& in, int rank) {
  std::vector<int64_t> s(static_cast<size_t>(rank));
  for (auto& x : s) x = static_cast<int64_t>(in.u8() % 15) - 4;  // [-4, 10]
  return s;
}

// A layout byte; >= 240: raw strides follow, one byte a dimension. Outputs
// never broadcast (that is what the overlap layout and raw strides try).
Layout pick_layout(Bytes& in, bool output, std::vector<int64_t>* raw, int rank) {
  const uint8_t b = in.u8();
  if (b >= 240) {
    *raw = random_strides(in, rank);
    return Layout::kExplicit;
  }
  Layout l = static_cast<Layout>(b % static_cast<uint8_t>(Layout::kCount));
  if (output && l == Layout::kBroadcast) l = Layout::kPadded;
  return l;
}

void decode_spec(Bytes& in, Case& c) {
  c.op = static_cast<LayerOp>(in.u8() % static_cast<int>(LayerOp::kCount));
  c.num_slots = kSlotCount[static_cast<int>(c.op)];
  const uint8_t fault = in.u8();
  if (fault >= 160) c.fault = static_cast<Fault>(1 + (fault - 160) % (static_cast<int>(Fault::kCount) - 1));
  const uint8_t misuse = in.u8();
  if (misuse >= 224 && c.fault == Fault::kNone)
    c.misuse = static_cast<OpMisuse>(1 + (misuse - 224) % (static_cast<int>(OpMisuse::kCount) - 1));
  const uint8_t dtype = in.u8();
  const DLDataType dtypes[] = {kF32, kF16, kBF16};
  c.dtype = dtypes[dtype % 3];
  c.out_dtype = (dtype & 0x80) != 0 ? c.dtype : kF32;  // the GEMMs' output: f32 or the inputs' dtype
  const uint8_t index_dtypes = in.u8();
  c.idx_dtype = (index_dtypes & 1) != 0 ? kI32 : kI64;
  c.gl_dtype = (index_dtypes & 2) != 0 ? kI32 : kI64;
  c.expert_dtype = (index_dtypes & 4) != 0 ? kI32 : kI64;
  const uint8_t flags = in.u8();
  c.row_idx_type = flags & 1;
  c.group_list_type = (flags >> 1) & 1;
  c.raw_contents = ((flags >> 2) & 1) != 0;
  const Values values[] = {Values::kSmallInt, Values::kSmallInt, Values::kUniform, Values::kRawBits};
  c.values = values[(flags >> 3) & 3];
  c.accumulate = ((flags >> 5) & 1) != 0;
  c.num_rows_null = ((flags >> 6) & 1) != 0;
  c.padding_rows = ((flags >> 7) & 1) != 0;

  const uint8_t batch = in.u8(), top_k = in.u8(), G = in.u8(), N = in.u8(), K = in.u8();
  c.batch = batch >= 240 ? 24 * (batch - 239) : 1 + batch % 8;  // past 240 rows: several row tiles and blocks
  c.top_k = 1 + (top_k >= 250 ? top_k % 9 : top_k % 4);
  c.G = 1 + (G >= 240 ? G % 16 : G % 6);
  c.N = N >= 240 ? 250 + N % 20 : 1 + N % 20;  // past 256: two column blocks of the weight grad
  c.K = K >= 240 ? 250 + K % 60 : 1 + K % 40;  // past 256: two reduction blocks of the forward
  // Keep one input fast even under ASan: at most ~2^15 multiply-adds (or
  // elements copied or added) a run.
  while (c.slots() * c.K * (c.gemm() ? c.N : 1) > (1 << 15)) {
    if (c.gemm() && c.N > 20) c.N = 1 + c.N % 20;
    else if (c.K > 40) c.K = 1 + c.K % 40;
    else c.batch = 1 + c.batch % 8;
  }
  c.keep_percent = in.u8() % 101;
  c.empty_percent = in.u8() % 60;
  c.tail = in.u8() % 4;
  const uint8_t capacity = in.u8(), active_num = in.u8();
  if (capacity >= 128) c.capacity = (capacity - 128) % 6;
  if (active_num >= 128) c.active_num = (active_num - 128) % (c.slots() + 3);
  for (int t = 0; t < c.num_slots; ++t) {
    const SlotSpec& s = kSlotSpecs[static_cast<int>(c.op)][t];
    const bool output = s.role == Role::kFloatOut || s.role == Role::kIndexOut;
    c.layout[t] = pick_layout(in, output, &c.raw_strides[t], s.rank);
  }
  const uint8_t pad = in.u8();
  c.pad = pad % 5;
  c.null_empty_data = pad >= 0xE0;
  c.pad_bytes = (in.u8() % 4) * 8;
  const uint8_t guards = in.u8();
  const size_t guard_bytes[] = {0, 8, 32, 64};
  c.guard_front = guard_bytes[guards & 3];
  c.guard_back = guard_bytes[(guards >> 2) & 3];
  c.data_at_element0 = (guards & 0x10) != 0;
  const moegrad_isa isas[] = {MOEGRAD_ISA_AUTO, MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512};
  const uint8_t isa = in.u8();
  c.isa = isas[isa % 4];
  c.fast_bf16 = isa >= 0xC0;
  if (!moegrad_isa_available(c.isa)) c.isa = MOEGRAD_ISA_AUTO;
  const uint8_t threads = in.u8();
  c.threads = 1 + threads % 3;
  c.one_shot = (threads & 0x80) != 0 && c.misuse == OpMisuse::kNone;
  c.misalign = in.u8() % 70;
  const std::vector<uint8_t> fills[] = {{0x00}, {0xFF}, {0xA5, 0x5A}, {0x01, 0x00, 0xC0, 0x7F},
                                        {0x00, 0x00, 0x80, 0xFF}};
  c.ws_fill = fills[in.u8() % 5];
  c.seed = in.u64();
}

// A routing as moe_init_routing leaves it, for the GEMMs' group lists and
// the scatter-add's index: each slot goes to a non-empty expert, kept or
// (padding_rows) left as an expanded row no token owns; each expert's rows
// shuffled. row_pos: expanded row -> original position or -1.
struct Rows {
  std::vector<int64_t> row_pos, counts;
};

Rows make_rows(const Case& c, Rng& rng) {
  std::vector<int64_t> live;
  for (int64_t g = 0; g < c.G; ++g)
    if (rng.uniform(0, 99) >= c.empty_percent) live.push_back(g);
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(c.G));
  for (int64_t p = 0; p < c.slots() && !live.empty(); ++p) {
    const int64_t g = live[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(live.size()) - 1))];
    if (rng.uniform(0, 99) < c.keep_percent) rows_of[static_cast<size_t>(g)].push_back(p);
    else if (c.padding_rows) rows_of[static_cast<size_t>(g)].push_back(-1);
  }
  Rows r;
  for (auto& rows : rows_of) {
    rng.shuffle(rows);
    r.counts.push_back(static_cast<int64_t>(rows.size()));
    r.row_pos.insert(r.row_pos.end(), rows.begin(), rows.end());
  }
  return r;
}

std::vector<int64_t> slot_strides(const Case& c, int t, const std::vector<int64_t>& shape) {
  return c.raw_strides[t].empty() ? layout_strides(c.layout[t], shape, c.pad) : c.raw_strides[t];
}

bool null_strides(const Case& c, int t) { return c.raw_strides[t].empty() && c.layout[t] == Layout::kCompact; }

Tensor& make_input(Case& c, int t, DLDataType dtype, std::vector<int64_t> shape) {
  const uint64_t elem = static_cast<uint64_t>((dtype.bits + 7) / 8);
  c.slot[t].input = std::make_unique<Tensor>(dtype, shape, slot_strides(c, t, shape), null_strides(c, t),
                                             c.pad_bytes / elem * elem);
  return *c.slot[t].input;
}

GuardedOutput& make_output(Case& c, int t, DLDataType dtype, std::vector<int64_t> shape) {
  c.slot[t].output = std::make_unique<GuardedOutput>(dtype, shape, slot_strides(c, t, shape), null_strides(c, t),
                                                     c.guard_front, c.guard_back, c.data_at_element0);
  return *c.slot[t].output;
}

void fill_ints(Tensor& t, const std::vector<int64_t>& v) {
  for (size_t e = 0; e < v.size(); ++e) t.set_int(t.offset_of_linear(static_cast<int64_t>(e)), v[e]);
}

// Overwrites 1-6 entries of an index input (expert ids, a group list, an
// expanded_row_idx) with values around and far outside their range, or
// another entry's value (a duplicate).
void apply_raw_contents(Bytes& in, Tensor& t, int64_t limit) {
  const int64_t len = t.numel();
  if (len == 0) return;
  const bool i32 = t.elem_bytes() == 4;
  const int64_t far_hi = i32 ? kI32Max : kI64Max, far_lo = i32 ? kI32Min : kI64Min;
  const int edits = 1 + in.u8() % 6;
  for (int e = 0; e < edits; ++e) {
    const int64_t at = t.offset_of_linear(in.below(len));
    const int64_t other = t.get_int(t.offset_of_linear(in.below(len)));
    const int64_t choices[] = {-1, -2, 0, limit - 1, limit, limit + 1, far_hi, far_lo, other,
                               static_cast<int64_t>(in.u8()) - 8};
    t.set_int(at, choices[in.u8() % 10]);
  }
}

void build_routing(Bytes& in, Case& c, Rng& rng) {
  std::vector<int64_t> live;
  for (int64_t g = 0; g < c.G; ++g)
    if (rng.uniform(0, 99) >= c.empty_percent) live.push_back(g);
  if (live.empty()) live.push_back(rng.uniform(0, c.G - 1));
  std::vector<int64_t> experts(static_cast<size_t>(c.slots()));
  for (auto& e : experts) e = live[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(live.size()) - 1))];
  c.R = routing_rows(c.slots(), c.G, c.active_num, c.capacity);
  fill_values(make_input(c, 0, c.dtype, {c.batch, c.K}), c.values, rng);
  Tensor& e = make_input(c, 1, c.expert_dtype, {c.batch, c.top_k});
  fill_ints(e, experts);
  if (c.raw_contents) apply_raw_contents(in, e, c.G);
  make_output(c, 2, c.dtype, {c.R, c.K});
  const int64_t idx_len = c.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL ? c.R : c.slots();
  make_output(c, 3, c.idx_dtype, {idx_len});
  make_output(c, 4, c.gl_dtype, {c.G});
  c.L = idx_len;
}

void build_gemm(Bytes& in, Case& c, Rng& rng) {
  const Rows rows = make_rows(c, rng);
  c.M = static_cast<int64_t>(rows.row_pos.size());
  const bool forward = c.op == LayerOp::kGroupedMatmul;
  fill_values(make_input(c, 0, c.dtype, {c.M, c.K}), c.values, rng);
  fill_values(make_input(c, 1, c.dtype, forward ? std::vector<int64_t>{c.G, c.K, c.N} : std::vector<int64_t>{c.M, c.N}),
              c.values, rng);
  std::vector<int64_t> gl = rows.counts;
  if (c.group_list_type == MOEGRAD_GROUP_LIST_CUMSUM)
    for (size_t g = 1; g < gl.size(); ++g) gl[g] += gl[g - 1];
  Tensor& group_list = make_input(c, 2, c.gl_dtype, {c.G});
  fill_ints(group_list, gl);
  if (c.raw_contents) apply_raw_contents(in, group_list, c.M);
  if (forward) {
    make_output(c, 3, c.out_dtype, {c.M, c.N});
    return;
  }
  GuardedOutput& gw = make_output(c, 3, c.out_dtype, {c.G, c.K, c.N});
  if (c.accumulate) {  // what grad_weight holds before: accumulate's other input
    Tensor before(c.out_dtype, {c.G, c.K, c.N});
    fill_values(before, c.values, rng);
    std::vector<uint64_t> bits(static_cast<size_t>(before.numel()));
    for (size_t e = 0; e < bits.size(); ++e) bits[e] = before.get_bits(static_cast<int64_t>(e));
    gw.set_initial(std::move(bits));
    gw.reset();
  }
}

void build_routing_grad(Bytes& in, Case& c, Rng& rng) {
  const Rows rows = make_rows(c, rng);
  c.M = static_cast<int64_t>(rows.row_pos.size());
  std::vector<int64_t> idx;
  if (c.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    idx = rows.row_pos;
    // Entries past M are ignored: values that would be errors.
    const int64_t junk[] = {c.slots(), -5, kI32Max, -1, 0};
    for (int64_t t = 0; t < c.tail; ++t) idx.push_back(junk[t % 5]);
  } else {
    idx.assign(static_cast<size_t>(c.slots()), -1);
    for (int64_t i = 0; i < c.M; ++i)
      if (rows.row_pos[static_cast<size_t>(i)] >= 0) idx[static_cast<size_t>(rows.row_pos[static_cast<size_t>(i)])] = i;
    idx.resize(static_cast<size_t>(std::max<int64_t>(c.slots() - c.tail, 0)));  // positions cut: rows unclaimed
  }
  c.L = static_cast<int64_t>(idx.size());
  fill_values(make_input(c, 0, c.dtype, {c.M, c.K}), c.values, rng);
  Tensor& t = make_input(c, 1, c.idx_dtype, {c.L});
  fill_ints(t, idx);
  if (c.raw_contents)
    apply_raw_contents(in, t, c.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL ? c.slots() : c.M);
  make_output(c, 2, kF32, {c.batch, c.K});
}

// Points every args field at its slot's view.
void wire_args(Case& c) {
  const DLTensor** fields[4][kMaxSlots] = {
      {&c.routing.x, &c.routing.expert_idx, &c.routing.expanded_x, &c.routing.expanded_row_idx,
       &c.routing.group_list},
      {&c.matmul.x, &c.matmul.weight, &c.matmul.group_list, &c.matmul.y, nullptr},
      {&c.weight_grad.x, &c.weight_grad.grad_y, &c.weight_grad.group_list, &c.weight_grad.grad_weight, nullptr},
      {&c.routing_grad.grad_expanded_x, &c.routing_grad.expanded_row_idx, &c.routing_grad.grad_x, nullptr, nullptr},
  };
  for (int t = 0; t < c.num_slots; ++t) {
    Slot& s = c.slot[t];
    s.spec = kSlotSpecs[static_cast<int>(c.op)][t];
    s.view.copy(s.is_output() ? s.output->dl() : s.input->dl(), s.elements());
    s.arg = fields[static_cast<int>(c.op)][t];
    *s.arg = &s.view.t;
  }
  c.num_rows_box[0] = c.num_rows_box[1] = c.num_rows_box[2] = kNumRowsGuard;
  c.routing.active_num = c.active_num;
  c.routing.capacity = c.capacity;
  c.routing.row_idx_type = c.row_idx_type;
  c.routing.num_rows = c.num_rows_null ? nullptr : &c.num_rows_box[1];
  c.matmul.group_list_type = c.group_list_type;
  c.weight_grad.group_list_type = c.group_list_type;
  c.weight_grad.accumulate = c.accumulate ? 1 : 0;
  c.routing_grad.batch = c.batch;
  c.routing_grad.top_k = c.top_k;
  c.routing_grad.row_idx_type = c.row_idx_type;
}

// Picks a slot where `ok` holds, from a byte; -1 if none.
template <typename Pred>
int pick_slot(Bytes& in, const Case& c, Pred ok) {
  const int start = in.u8() % c.num_slots;
  for (int i = 0; i < c.num_slots; ++i)
    if (ok((start + i) % c.num_slots)) return (start + i) % c.num_slots;
  return -1;
}

bool is_float_role(Role r) { return r == Role::kFloatIn || r == Role::kFloatOut; }

// The other 16-bit float dtype (for f32: f16 or bf16, by `pick`): never
// wider, so the tensor's view stays inside its storage and aligned.
DLDataType other_float(DLDataType d, uint8_t pick) {
  if (same_dtype(d, kF16)) return kBF16;
  if (same_dtype(d, kBF16)) return kF16;
  return (pick & 1) != 0 ? kF16 : kBF16;
}

bool apply_shape_mismatch(Bytes& in, Case& c) {
  const int64_t grow = 1 + in.u8() % 3;
  const uint8_t variant = in.u8();
  auto fault_is = [&](const char* detail, std::initializer_list<moegrad_status> s) {
    c.fault_detail = detail;
    c.fault_statuses.assign(s);
  };
  switch (c.op) {
    case LayerOp::kMoeInitRouting:
      switch (variant % 4) {
        case 0:
          c.view("expert_idx").shape[0] = c.batch + grow;
          fault_is("expert_idx rows", {MOEGRAD_STATUS_BATCH_MISMATCH});
          break;
        case 1:  // x's rows are the batch, which R follows
          c.view("x").shape[0] = c.batch + grow;
          fault_is("x rows", {MOEGRAD_STATUS_BATCH_MISMATCH, MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
        case 2:
          c.view("expanded_x").shape[(variant >> 2) & 1] += grow;
          fault_is("expanded_x shape", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
        default:
          c.view("expanded_row_idx").shape[0] += grow;
          fault_is("expanded_row_idx length", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
      }
      return true;
    case LayerOp::kGroupedMatmul:
      switch (variant % 4) {
        case 0:
          c.view("weight").shape[1] = c.K + grow;
          fault_is("weight K", {MOEGRAD_STATUS_K_MISMATCH});
          break;
        case 1:
          c.view("group_list").shape[0] = c.G + grow;
          fault_is("group_list length", {MOEGRAD_STATUS_GROUP_COUNT_MISMATCH});
          break;
        case 2:
          c.view("y").shape[(variant >> 2) & 1] += grow;
          fault_is("y shape", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
        default:
          c.view("x").shape[0] = c.M + grow;
          fault_is("x rows", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
      }
      return true;
    case LayerOp::kGroupedMatmulWeightGrad:
      switch (variant % 4) {
        case 0:
          c.view("grad_y").shape[0] = c.M + grow;
          fault_is("grad_y rows", {MOEGRAD_STATUS_M_MISMATCH});
          break;
        case 1:
          c.view("grad_weight").shape[(variant >> 2) % 3] += grow;
          fault_is("grad_weight shape", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
        case 2:  // G, K: group_list's length, x's columns, which grad_weight's shape misses
          c.view("group_list").shape[0] = c.G + grow;
          fault_is("group_list length", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
        default:
          c.view("x").shape[1] = c.K + grow;
          fault_is("x columns", {MOEGRAD_STATUS_OUTPUT_SHAPE});
          break;
      }
      return true;
    default:
      break;
  }
  // moe_init_routing_grad: SPEC §4.4 and §4.7.
  View& idx = c.view("expanded_row_idx");
  switch (variant % 4) {
    case 1:
      if (c.M > c.batch) {
        c.routing_grad.top_k = (c.M - 1) / c.batch;  // >= 1, and batch*top_k < M
        // A type 1 index longer than the new batch*top_k breaks §4.7's other rule too.
        if (c.row_idx_type == 1 && c.L > c.batch * c.routing_grad.top_k)
          fault_is("M exceeds slots", {MOEGRAD_STATUS_M_EXCEEDS_SLOTS, MOEGRAD_STATUS_INDEX_TOO_LONG});
        else
          fault_is("M exceeds slots", {MOEGRAD_STATUS_M_EXCEEDS_SLOTS});
        return true;
      }
      break;
    case 2:
      if (c.row_idx_type == 0 && c.M > 0) {
        idx.shape[0] = c.M - 1 - in.below(c.M);
        fault_is("index too short", {MOEGRAD_STATUS_INDEX_TOO_SHORT});
        return true;
      }
      break;
    case 3:
      if (c.row_idx_type == 1) {
        idx.shape[0] = c.slots() + grow;
        fault_is("index too long", {MOEGRAD_STATUS_INDEX_TOO_LONG});
        return true;
      }
      break;
    default:
      break;
  }
  c.view("grad_x").shape[(variant >> 2) & 1] += grow;
  fault_is("grad_x shape", {MOEGRAD_STATUS_GRAD_X_SHAPE});
  return true;
}

bool apply_empty_dim(Bytes& in, Case& c) {
  const uint8_t variant = in.u8();
  auto zero = [&](const char* name, int d) { c.view(name).shape[d] = 0; };
  c.fault_statuses = {MOEGRAD_STATUS_EMPTY_DIMENSION};
  switch (c.op) {
    case LayerOp::kMoeInitRouting:
      // G, top_k and batch also set R, which the outputs' shapes then miss.
      switch (variant % 4) {
        case 0:
          zero("x", 1);
          zero("expanded_x", 1);
          c.fault_detail = "K";
          break;
        case 1:
          zero("group_list", 0);
          c.fault_detail = "G";
          c.fault_statuses.push_back(MOEGRAD_STATUS_OUTPUT_SHAPE);
          break;
        case 2:
          zero("expert_idx", 1);
          c.fault_detail = "top_k";
          c.fault_statuses = {MOEGRAD_STATUS_BAD_TOP_K, MOEGRAD_STATUS_OUTPUT_SHAPE};
          break;
        default:
          zero("x", 0);
          zero("expert_idx", 0);
          c.fault_detail = "batch";
          c.fault_statuses = {MOEGRAD_STATUS_BAD_BATCH, MOEGRAD_STATUS_OUTPUT_SHAPE};
          break;
      }
      return true;
    case LayerOp::kGroupedMatmul:
      switch (variant % 3) {
        case 0: zero("weight", 2), zero("y", 1), c.fault_detail = "N"; break;
        case 1: zero("x", 1), zero("weight", 1), c.fault_detail = "K"; break;
        default: zero("weight", 0), zero("group_list", 0), c.fault_detail = "G"; break;
      }
      return true;
    case LayerOp::kGroupedMatmulWeightGrad:
      switch (variant % 3) {
        case 0: zero("grad_y", 1), zero("grad_weight", 2), c.fault_detail = "N"; break;
        case 1: zero("x", 1), zero("grad_weight", 1), c.fault_detail = "K"; break;
        default: zero("group_list", 0), zero("grad_weight", 0), c.fault_detail = "G"; break;
      }
      return true;
    default:
      zero("grad_expanded_x", 1);
      zero("grad_x", 1);
      c.fault_detail = "K";
      return true;
  }
}

bool apply_attribute(Bytes& in, Case& c) {
  const uint8_t variant = in.u8(), value = in.u8();
  const int64_t bad_limit[] = {-2, -3, kI64Min};
  const int32_t bad_row_idx_type[] = {2, -1, kI32Min, 255};
  const int32_t bad_group_list_type[] = {2, -1, kI32Max, 7};
  switch (c.op) {
    case LayerOp::kMoeInitRouting:
      // A limit or index type out of range leaves R (and so the outputs'
      // shapes) undefined.
      switch (variant % 3) {
        case 0:
          c.routing.active_num = bad_limit[value % 3];
          c.fault_detail = "active_num";
          c.fault_statuses = {MOEGRAD_STATUS_BAD_ACTIVE_NUM, MOEGRAD_STATUS_OUTPUT_SHAPE};
          break;
        case 1:
          c.routing.capacity = bad_limit[value % 3];
          c.fault_detail = "capacity";
          c.fault_statuses = {MOEGRAD_STATUS_BAD_CAPACITY, MOEGRAD_STATUS_OUTPUT_SHAPE};
          break;
        default:
          c.routing.row_idx_type = bad_row_idx_type[value % 4];
          c.fault_detail = "row_idx_type";
          c.fault_statuses = {MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, MOEGRAD_STATUS_OUTPUT_SHAPE};
          break;
      }
      return true;
    case LayerOp::kGroupedMatmul:
      c.matmul.group_list_type = bad_group_list_type[value % 4];
      c.fault_detail = "group_list_type";
      c.fault_statuses = {MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE};
      return true;
    case LayerOp::kGroupedMatmulWeightGrad:
      if (variant % 2 == 0) {
        c.weight_grad.group_list_type = bad_group_list_type[value % 4];
        c.fault_detail = "group_list_type";
        c.fault_statuses = {MOEGRAD_STATUS_BAD_GROUP_LIST_TYPE};
      } else {
        const int32_t bad[] = {2, -1, kI32Min};
        c.weight_grad.accumulate = bad[value % 3];
        c.fault_detail = "accumulate";
        c.fault_statuses = {MOEGRAD_STATUS_BAD_ACCUMULATE};
      }
      return true;
    default:
      break;
  }
  moegrad_moe_init_routing_grad_args& a = c.routing_grad;
  const int64_t bad_count[] = {0, -1, kI64Min};
  switch (variant % 4) {
    case 0:
      // grad_x keeps batch's rows, and batch*top_k <= 0 < M where M > 0.
      a.batch = bad_count[value % 3];
      c.fault_detail = "batch";
      c.fault_statuses = {MOEGRAD_STATUS_BAD_BATCH, MOEGRAD_STATUS_GRAD_X_SHAPE, MOEGRAD_STATUS_M_EXCEEDS_SLOTS,
                          MOEGRAD_STATUS_INDEX_TOO_LONG};
      break;
    case 1:
      a.top_k = bad_count[value % 3];
      c.fault_detail = "top_k";
      c.fault_statuses = {MOEGRAD_STATUS_BAD_TOP_K, MOEGRAD_STATUS_M_EXCEEDS_SLOTS, MOEGRAD_STATUS_INDEX_TOO_LONG};
      break;
    case 2:
      // The index's length rules depend on the type.
      a.row_idx_type = bad_row_idx_type[value % 4];
      c.fault_detail = "row_idx_type";
      c.fault_statuses = {MOEGRAD_STATUS_BAD_ROW_IDX_TYPE, MOEGRAD_STATUS_INDEX_TOO_SHORT,
                          MOEGRAD_STATUS_INDEX_TOO_LONG};
      break;
    default:
      if (c.batch < 2) return false;
      a.top_k = kI64Max / c.batch + 1 + value % 3;
      c.fault_detail = "batch*top_k overflow";
      c.fault_statuses = {MOEGRAD_STATUS_SIZE_OVERFLOW};
      return true;
  }
  if (int64_t slots = 0; __builtin_mul_overflow(a.batch, a.top_k, &slots))
    c.fault_statuses.push_back(MOEGRAD_STATUS_SIZE_OVERFLOW);
  return true;
}

// First and last byte of a view's elements (a view with elements).
struct ByteRange {
  uintptr_t lo, hi;
};

ByteRange byte_range(const View& v) {
  const Extent e = v.extent();
  const auto elem = static_cast<int64_t>((v.t.dtype.bits + 7) / 8);
  const uintptr_t first = reinterpret_cast<uintptr_t>(v.t.data) + v.t.byte_offset;
  return {first + static_cast<uintptr_t>(e.min_offset * elem),
          first + static_cast<uintptr_t>(e.max_offset * elem + elem - 1)};
}

// Moves a view (data = its element 0, byte_offset 0) so that its first
// byte is at `lo`, which must be aligned for its elements.
void move_first_byte_to(View& v, uintptr_t lo) {
  const ByteRange r = byte_range(v);
  const uintptr_t element0 = reinterpret_cast<uintptr_t>(v.t.data) + v.t.byte_offset;
  v.t.data = reinterpret_cast<void*>(lo + (element0 - r.lo));
  v.t.byte_offset = 0;
}

uintptr_t align_down(uintptr_t p, uintptr_t a) { return p - p % a; }

// An output moved onto another tensor (an input or another output), or
// that tensor onto it, so that their address ranges share at least one
// byte, each still aligned; routing's num_rows may be the output. Each
// placement puts an end of one range on an end of the other, so a range
// computed one element short, or from element 0 where strides reverse it,
// lets the call through. The moved pointers may point outside any
// allocation: a library that accepted the call would touch memory there,
// which ASan reports.
bool apply_aliasing(Bytes& in, Case& c) {
  std::vector<int> outputs;
  for (int t = 0; t < c.num_slots; ++t)
    if (c.slot[t].is_output() && c.slot[t].view.has_elements()) outputs.push_back(t);
  const bool num_rows = c.op == LayerOp::kMoeInitRouting && !c.num_rows_null;
  const int choices = static_cast<int>(outputs.size()) + (num_rows ? 1 : 0);
  if (choices == 0) return false;
  const int choice = in.u8() % choices;
  const int out = choice < static_cast<int>(outputs.size()) ? outputs[static_cast<size_t>(choice)] : -1;
  const int partner = pick_slot(in, c, [&](int t) { return t != out && c.slot[t].view.has_elements(); });
  if (partner < 0) return false;
  View& p = c.slot[partner].view;
  const ByteRange r = byte_range(p);
  c.fault_statuses = {MOEGRAD_STATUS_ALIASING};
  if (out < 0) {  // num_rows's 8 bytes on the partner's first or last byte
    const bool last = (in.u8() & 1) != 0;
    c.routing.num_rows = reinterpret_cast<int64_t*>(align_down(last ? r.hi : r.lo, 8));
    c.fault_detail = std::string("num_rows on the ") + (last ? "last" : "first") + " byte of ";
    c.fault_detail += c.slot[partner].spec.name;
    return true;
  }
  View& o = c.slot[out].view;
  const ByteRange g = byte_range(o);
  const auto o_elem = static_cast<uintptr_t>(o.t.dtype.bits / 8), p_elem = static_cast<uintptr_t>(p.t.dtype.bits / 8);
  const uintptr_t o_bytes = g.hi - g.lo + 1, p_bytes = r.hi - r.lo + 1;  // multiples of the element sizes
  const char* how = "";
  switch (in.u8() % 5) {
    case 0:  // the output starts in the partner's first element
      move_first_byte_to(o, align_down(r.lo, o_elem));
      how = "output-first-on-first";
      break;
    case 1:  // the output's last element holds the partner's first byte
      move_first_byte_to(o, align_down(r.lo, o_elem) + o_elem - o_bytes);
      how = "output-last-on-first";
      break;
    case 2:  // the output's first element holds the partner's last byte
      move_first_byte_to(o, align_down(r.hi, o_elem));
      how = "output-first-on-last";
      break;
    case 3:  // the partner's first element holds the output's first byte
      move_first_byte_to(p, align_down(g.lo, p_elem));
      how = "first-on-output-first";
      break;
    default:  // the partner's last element holds the output's last byte
      move_first_byte_to(p, align_down(g.hi, p_elem) + p_elem - p_bytes);
      how = "last-on-output-last";
      break;
  }
  c.fault_detail = std::string(c.slot[out].spec.name) + " and " + c.slot[partner].spec.name + " " + how;
  return true;
}

// Applies c.fault to the views and args; false if it cannot apply to this
// case (which then runs without one).
bool apply_fault(Bytes& in, Case& c) {
  auto expect = [&](std::initializer_list<moegrad_status> s) { c.fault_statuses.assign(s); };
  auto any = [](int) { return true; };
  auto with_elements = [&](int t) { return c.slot[t].view.has_elements(); };
  int t = -1;
  auto name = [&] { c.fault_detail = c.slot[t].spec.name; };
  switch (c.fault) {
    case Fault::kNone:
    case Fault::kCount:
      return true;
    case Fault::kNullArgs:
      c.null_args = true;
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    case Fault::kNullTensor:
      t = pick_slot(in, c, any);
      *c.slot[t].arg = nullptr;
      name();
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    case Fault::kNullShape:
      t = pick_slot(in, c, any);
      c.slot[t].view.t.shape = nullptr;
      name();
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    case Fault::kNullData:
      t = pick_slot(in, c, with_elements);
      if (t < 0) return false;
      c.slot[t].view.t.data = nullptr;
      c.slot[t].view.t.byte_offset = 0;
      name();
      expect({MOEGRAD_STATUS_NULL_POINTER});
      return true;
    case Fault::kRank: {
      t = pick_slot(in, c, any);
      const int32_t ranks[] = {0, 1, 2, 3, 4, -1, 100};
      int32_t r = ranks[in.u8() % 7];
      if (r == c.slot[t].spec.rank) r = c.slot[t].spec.rank + 1;
      c.slot[t].view.t.ndim = r;
      name();
      expect({MOEGRAD_STATUS_BAD_RANK});
      return true;
    }
    case Fault::kDtype: {
      t = pick_slot(in, c, any);
      const DLDataType bad_float[] = {{kDLFloat, 64, 1}, {kDLInt, 32, 1}, {kDLFloat, 8, 1}, {kDLBfloat, 32, 1},
                                      {kDLUInt, 16, 1}, {kDLFloat, 0, 1}, {kDLComplex, 64, 1}};
      const DLDataType bad_index[] = {{kDLFloat, 32, 1}, {kDLUInt, 64, 1}, {kDLInt, 16, 1}, {kDLInt, 8, 1},
                                      {kDLUInt, 32, 1}, {kDLInt, 0, 1}, {kDLFloat, 64, 1}};
      c.slot[t].view.t.dtype = is_float_role(c.slot[t].spec.role) ? bad_float[in.u8() % 7] : bad_index[in.u8() % 7];
      name();
      expect({MOEGRAD_STATUS_BAD_DTYPE});
      return true;
    }
    case Fault::kLanes:
      t = pick_slot(in, c, any);
      c.slot[t].view.t.dtype.lanes = static_cast<uint16_t>(2 + in.u8() % 3);
      name();
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    case Fault::kDevice: {
      t = pick_slot(in, c, any);
      const int devices[] = {kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLMetal, kDLROCM};
      c.slot[t].view.t.device = {static_cast<DLDeviceType>(devices[in.u8() % 6]), 0};
      name();
      expect({MOEGRAD_STATUS_UNSUPPORTED_DEVICE});
      return true;
    }
    case Fault::kNegativeDim:
      t = pick_slot(in, c, any);
      c.slot[t].view.shape[in.u8() % c.slot[t].spec.rank] = (in.u8() & 1) != 0 ? -1 : kI64Min;
      name();
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    case Fault::kDimTooLarge: {
      t = pick_slot(in, c, any);
      const int64_t big[] = {int64_t{1} << 31, kI64Max, int64_t{1} << 40};
      const uint8_t d = in.u8() % c.slot[t].spec.rank;
      c.slot[t].view.shape[d] = big[in.u8() % 3];
      name();
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
    case Fault::kStrideOverflow: {
      // A stepping dimension of a tensor with elements gets a stride whose
      // byte span cannot be represented.
      t = pick_slot(in, c, [&](int i) {
        const View& v = c.slot[i].view;
        if (!v.has_elements()) return false;
        for (int d = 0; d < v.t.ndim; ++d)
          if (v.shape[d] >= 2) return true;
        return false;
      });
      if (t < 0) return false;
      View& v = c.slot[t].view;
      int d = 0;
      while (v.shape[d] < 2) ++d;
      v.t.strides = v.strides;
      v.strides[d] = (in.u8() & 1) != 0 ? kI64Max : kI64Min;
      name();
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
    case Fault::kMisalignedData: {
      t = pick_slot(in, c, with_elements);
      if (t < 0) return false;
      const int elem = c.slot[t].view.t.dtype.bits / 8;
      c.slot[t].view.t.byte_offset += 1 + in.u8() % static_cast<unsigned>(elem - 1);
      name();
      expect({MOEGRAD_STATUS_BAD_LAYOUT});
      return true;
    }
    case Fault::kByteOffsetWrap: {
      // data + byte_offset wrapping below the buffer: 2^64 - x is no
      // offset at all, and is refused even for a tensor without elements.
      t = pick_slot(in, c, any);
      const uint64_t elem = static_cast<uint64_t>(c.slot[t].view.t.dtype.bits / 8);
      c.slot[t].view.t.byte_offset = uint64_t{0} - elem * (1 + in.u8() % 4);
      name();
      expect({MOEGRAD_STATUS_SIZE_OVERFLOW});
      return true;
    }
    case Fault::kDtypeMismatch: {
      const char* names[] = {"expanded_x", "weight", "grad_y", nullptr};
      const char* n = names[static_cast<int>(c.op)];
      if (n == nullptr) return false;
      c.view(n).t.dtype = other_float(c.dtype, in.u8());
      c.fault_detail = n;
      expect({MOEGRAD_STATUS_DTYPE_MISMATCH});
      return true;
    }
    case Fault::kOutputDtype: {
      const char* names[] = {nullptr, "y", "grad_weight", "grad_x"};
      const char* n = names[static_cast<int>(c.op)];
      if (n == nullptr) return false;
      // Neither float32 nor x's dtype (grad_x: not float32).
      c.view(n).t.dtype = c.op == LayerOp::kMoeInitRoutingGrad || same_dtype(c.dtype, kF32)
                              ? other_float(kF32, in.u8())
                              : other_float(c.dtype, 0);
      c.fault_detail = n;
      expect({MOEGRAD_STATUS_BAD_DTYPE});
      if (c.op == LayerOp::kGroupedMatmulWeightGrad && c.accumulate)
        c.fault_statuses.push_back(MOEGRAD_STATUS_ACCUMULATE_NEEDS_F32);
      return true;
    }
    case Fault::kShapeMismatch:
      return apply_shape_mismatch(in, c);
    case Fault::kEmptyDim:
      return apply_empty_dim(in, c);
    case Fault::kAttribute:
      return apply_attribute(in, c);
    case Fault::kAliasing:
      return apply_aliasing(in, c);
  }
  return false;
}

// The tensor bytes a kWorkspaceOverlap workspace meets: a tensor with
// elements, or routing's num_rows.
void decode_overlap(Bytes& in, Case& c) {
  const bool num_rows = c.op == LayerOp::kMoeInitRouting && !c.num_rows_null;
  const uint8_t pick = in.u8();
  c.overlap_placement = static_cast<OverlapPlacement>(in.u8() % static_cast<int>(OverlapPlacement::kCount));
  if (num_rows && pick % 4 == 0) {
    c.overlap_first = reinterpret_cast<uintptr_t>(c.routing.num_rows);
    c.overlap_last = c.overlap_first + sizeof(int64_t) - 1;
    c.overlap_detail = "num_rows";
    return;
  }
  // The weight grad's grad_weight, the forward's weight and routing's
  // expert_idx and group_list always have elements.
  int t = pick % c.num_slots;
  while (!c.slot[t].view.has_elements()) t = (t + 1) % c.num_slots;
  const ByteRange r = byte_range(c.slot[t].view);
  c.overlap_first = r.lo;
  c.overlap_last = r.hi;
  c.overlap_detail = c.slot[t].spec.name;
}

std::string layout_string(const Case& c) {
  std::string s;
  for (int t = 0; t < c.num_slots; ++t) {
    s += t == 0 ? "" : "/";
    if (c.raw_strides[t].empty()) {
      s += layout_name(c.layout[t]);
      continue;
    }
    s += "raw(";
    for (size_t d = 0; d < c.raw_strides[t].size(); ++d) {
      if (d > 0) s += ',';  // += : GCC 12 misreports "," + std::string (-Wrestrict, PR 105329)
      s += std::to_string(c.raw_strides[t][d]);
    }
    s += ")";
  }
  return s;
}

}  // namespace

const char* fault_name(Fault f) {
  static const char* const names[] = {"none", "null-args", "null-tensor", "null-shape", "null-data", "rank", "dtype",
                                      "lanes", "device", "negative-dim", "dim-too-large", "stride-overflow",
                                      "misaligned-data", "byte-offset-wrap", "dtype-mismatch", "output-dtype",
                                      "shape-mismatch", "empty-dim", "attribute", "aliasing"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(Fault::kCount));
  return names[static_cast<size_t>(f)];
}

void decode_ops_case(const uint8_t* data, size_t size, Case& c) {
  Bytes in(data, size);
  decode_spec(in, c);
  if (fuzz_skip(fault_name(c.fault))) c.fault = Fault::kNone;
  if (fuzz_skip(op_misuse_name(c.misuse))) c.misuse = OpMisuse::kNone;
  Rng rng(c.seed);
  switch (c.op) {
    case LayerOp::kMoeInitRouting: build_routing(in, c, rng); break;
    case LayerOp::kMoeInitRoutingGrad: build_routing_grad(in, c, rng); break;
    default: build_gemm(in, c, rng); break;
  }
  wire_args(c);
  if (!apply_fault(in, c)) {
    c.fault = Fault::kNone;
    c.fault_detail.clear();
    c.fault_statuses.clear();
  }
  // A tensor without elements may have NULL data (moegrad.h), e.g. x and y
  // of a grouped matmul where no row is routed, or expanded_x where R = 0.
  if (c.null_empty_data && c.fault == Fault::kNone)
    for (int t = 0; t < c.num_slots; ++t)
      if (!c.slot[t].view.has_elements()) c.slot[t].view.t.data = nullptr, c.slot[t].view.t.byte_offset = 0;
  if (c.misuse == OpMisuse::kWorkspaceOverlap) decode_overlap(in, c);
}

std::string describe_ops_case(const Case& c) {
  auto limit = [](int64_t v) { return v == MOEGRAD_NO_LIMIT ? std::string("none") : std::to_string(v); };
  std::string s = std::string("op=") + layer_op_name(c.op) + " dtype=" + dtype_string(c.dtype);
  if (c.gemm()) s += " out=" + dtype_string(c.out_dtype);
  s += " idx=" + dtype_string(c.idx_dtype) + " gl=" + dtype_string(c.gl_dtype);
  if (c.op == LayerOp::kMoeInitRouting) s += " experts=" + dtype_string(c.expert_dtype);
  s += " batch=" + std::to_string(c.batch) + " top_k=" + std::to_string(c.top_k) + " G=" + std::to_string(c.G) +
       " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " M=" + std::to_string(c.M) +
       " L=" + std::to_string(c.L) + " R=" + std::to_string(c.R) + " type=" + std::to_string(c.row_idx_type) +
       " gl_type=" + std::to_string(c.group_list_type) + " capacity=" + limit(c.capacity) +
       " active_num=" + limit(c.active_num) + " accumulate=" + (c.accumulate ? "1" : "0") +
       " num_rows=" + (c.num_rows_null ? "null" : "set") + " raw_contents=" + (c.raw_contents ? "1" : "0") +
       " layouts=" + layout_string(c) + " pad=" + std::to_string(c.pad) + " pad_bytes=" + std::to_string(c.pad_bytes) +
       " guards=" + std::to_string(c.guard_front) + "," + std::to_string(c.guard_back) +
       " fault=" + fault_name(c.fault);
  if (!c.fault_detail.empty()) s += "(" + c.fault_detail + ")";
  s += std::string(" misuse=") + op_misuse_name(c.misuse);
  if (c.misuse == OpMisuse::kWorkspaceOverlap) s += "(" + c.overlap_detail + ")";
  s += std::string(" isa=") + moegrad_isa_name(c.isa) + " fast_bf16=" + (c.fast_bf16 ? "1" : "0") +
       " threads=" + std::to_string(c.threads) + " one_shot=" + (c.one_shot ? "1" : "0") +
       " misalign=" + std::to_string(c.misalign) + (c.null_empty_data ? " null_empty_data=1" : "") +
       " seed=" + std::to_string(c.seed);
  return s;
}

}  // namespace mgh::ops

#include "problem.h"

#include <algorithm>

namespace mgh {

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kCompact: return "compact";
    case Layout::kExplicit: return "explicit";
    case Layout::kPadded: return "padded";
    case Layout::kReversed: return "reversed";
    case Layout::kSwapInner: return "swap-inner";
    case Layout::kNegative: return "negative";
    case Layout::kBroadcast: return "broadcast";
    case Layout::kOverlap: return "overlap";
    case Layout::kCount: break;
  }
  return "?";
}

std::vector<int64_t> layout_strides(Layout l, const std::vector<int64_t>& shape, int64_t pad) {
  const size_t n = shape.size();
  auto dim = [&](size_t d) { return std::max<int64_t>(shape[d], 1); };
  std::vector<int64_t> s = compact_strides(shape);
  switch (l) {
    case Layout::kCompact:
    case Layout::kExplicit:
    case Layout::kCount:
      break;
    case Layout::kPadded:
    case Layout::kNegative:
      for (size_t d = n; d-- > 0;) s[d] = d + 1 == n ? 1 : s[d + 1] * dim(d + 1) + pad;
      if (l == Layout::kNegative)
        for (auto& x : s) x = -x;
      break;
    case Layout::kReversed:
      for (size_t d = 0; d < n; ++d) s[d] = d == 0 ? 1 : s[d - 1] * dim(d - 1) + pad;
      break;
    case Layout::kSwapInner:
      if (n >= 2) {
        // The buffer is [.., shape[n-1], shape[n-2]] row-major.
        s[n - 2] = 1;
        s[n - 1] = dim(n - 2);
        for (size_t d = n - 2; d-- > 0;) s[d] = (d + 3 == n ? dim(n - 1) * dim(n - 2) : s[d + 1] * dim(d + 1));
      }
      break;
    case Layout::kBroadcast:
      if (n >= 1) s[0] = 0;
      break;
    case Layout::kOverlap:
      for (auto& x : s) x = 1;
      break;
  }
  return s;
}

std::string ProblemSpec::describe() const {
  return "dtype=" + dtype_string(dtype) + " idx=" + dtype_string(idx_dtype) + " gl=" + dtype_string(gl_dtype) +
         " batch=" + std::to_string(batch) + " top_k=" + std::to_string(top_k) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K) + " G=" + std::to_string(G) + " type=" + std::to_string(row_idx_type) +
         " gl_type=" + std::to_string(group_list_type) + " layouts gy/w/idx/gl/gx=" + layout_name(gy_layout) +
         "/" + layout_name(w_layout) + "/" + layout_name(idx_layout) + "/" + layout_name(gl_layout) + "/" +
         layout_name(gx_layout) + " seed=" + std::to_string(seed);
}

void fill_values(Tensor& t, Values v, Rng& rng) {
  const bool f32 = same_dtype(t.dtype(), kF32);
  for (int64_t e = 0; e < t.numel(); ++e) {
    const int64_t off = t.offset_of_linear(e);
    switch (v) {
      case Values::kSmallInt:
        t.set(off, static_cast<double>(rng.uniform(-4, 4)));
        break;
      case Values::kUniform: {
        // A value with as many mantissa bits as the dtype holds, in [-2, 2).
        const int bits = f32 ? 24 : same_dtype(t.dtype(), kF16) ? 11 : 8;
        const double m = static_cast<double>(rng.uniform(-(int64_t{1} << bits), (int64_t{1} << bits) - 1));
        t.set(off, m / static_cast<double>(int64_t{1} << (bits - 1)));
        break;
      }
      case Values::kRawBits:
        t.set_bits(off, f32 ? (rng.next() & 0xffffffffu) : (rng.next() & 0xffffu));
        break;
    }
  }
}

Problem::Problem(const ProblemSpec& s) : spec(s) {
  Rng rng(s.seed);
  const int64_t slots = s.batch * s.top_k;
  // Route every slot: kept ones to a (non-empty) expert, dropped ones maybe to
  // a padding row of some expert.
  std::vector<bool> empty(static_cast<size_t>(s.G));
  std::vector<int64_t> live;
  for (int64_t g = 0; g < s.G; ++g) {
    empty[static_cast<size_t>(g)] = rng.uniform(0, 99) < s.empty_percent;
    if (!empty[static_cast<size_t>(g)]) live.push_back(g);
  }
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(s.G));  // per expert: position or -1
  for (int64_t p = 0; p < slots; ++p) {
    if (live.empty()) break;
    const int64_t g = live[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(live.size()) - 1))];
    const bool kept = rng.uniform(0, 99) < s.keep_percent;
    if (kept) rows_of[static_cast<size_t>(g)].push_back(p);
    else if (s.padding_rows) rows_of[static_cast<size_t>(g)].push_back(-1);
  }
  std::vector<int64_t> row_pos;  // expanded row -> position or -1
  std::vector<int64_t> counts;
  for (auto& r : rows_of) {
    rng.shuffle(r);
    counts.push_back(static_cast<int64_t>(r.size()));
    row_pos.insert(row_pos.end(), r.begin(), r.end());
  }
  M = static_cast<int64_t>(row_pos.size());

  std::vector<int64_t> idx_values;
  if (s.row_idx_type == MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL) {
    idx_values = row_pos;
    // Entries past M are ignored: fill them with values that would be errors.
    const int64_t junk[] = {slots, -5, INT32_MAX, -1, 0};
    for (int64_t t = 0; t < s.tail; ++t) idx_values.push_back(junk[t % 5]);
  } else {
    idx_values.assign(static_cast<size_t>(slots), -1);
    for (int64_t i = 0; i < M; ++i)
      if (row_pos[static_cast<size_t>(i)] >= 0) idx_values[static_cast<size_t>(row_pos[static_cast<size_t>(i)])] = i;
    idx_values.resize(static_cast<size_t>(std::max<int64_t>(slots - s.tail, 0)));  // cut positions: rows unclaimed
  }
  L = static_cast<int64_t>(idx_values.size());

  auto make = [&](DLDataType dt, std::vector<int64_t> shape, Layout l, const std::vector<int64_t>& strides) {
    const int eb = (dt.bits + 7) / 8;
    const bool raw = !strides.empty();
    return Tensor(dt, shape, raw ? strides : layout_strides(l, shape, s.pad), !raw && l == Layout::kCompact,
                  s.pad_bytes / static_cast<uint64_t>(eb) * static_cast<uint64_t>(eb));
  };
  grad_y = make(s.dtype, {M, s.N}, s.gy_layout, s.gy_strides);
  weight = make(s.dtype, {s.G, s.K, s.N}, s.w_layout, s.w_strides);
  idx = make(s.idx_dtype, {L}, s.idx_layout, s.idx_strides);
  group_list = make(s.gl_dtype, {s.G}, s.gl_layout, s.gl_strides);
  grad_x = make(kF32, {s.batch, s.K}, s.gx_layout, s.gx_strides);

  fill_values(grad_y, s.values, rng);
  fill_values(weight, s.values, rng);
  for (int64_t i = 0; i < L; ++i) idx.set_int(idx.offset({i}), idx_values[static_cast<size_t>(i)]);
  int64_t sum = 0;
  for (int64_t g = 0; g < s.G; ++g) {
    sum += counts[static_cast<size_t>(g)];
    group_list.set_int(group_list.offset({g}),
                       s.group_list_type == MOEGRAD_GROUP_LIST_CUMSUM ? sum : counts[static_cast<size_t>(g)]);
  }
  grad_x.fill_words(0x7FC0DEADu);

  args_.grad_y = &grad_y.dl();
  args_.weight = &weight.dl();
  args_.expanded_row_idx = &idx.dl();
  args_.group_list = &group_list.dl();
  args_.grad_x = &grad_x.dl();
  args_.batch = s.batch;
  args_.top_k = s.top_k;
  args_.row_idx_type = s.row_idx_type;
  args_.group_list_type = s.group_list_type;
}

}  // namespace mgh

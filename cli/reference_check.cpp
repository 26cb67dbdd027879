#include "reference_check.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <vector>

#include "parallel_for.h"

namespace moegrad::cli {
namespace {

struct Slot {
  std::size_t row;     // expanded row of grad_y
  std::size_t expert;  // g(row)
};

struct DotResult {
  double sum;
  double abs_sum;  // sum of |terms|, for the bound
};

// sum_j gy[j] * w[j] in double. Products of two widened 24-bit significands
// are exact in double; only the sum rounds, far below the f32 bound checked.
// Four independent chains for speed: the order is irrelevant at this precision.
template <class Widen>
DotResult dot(const double* gy, const void* w, std::size_t n, Widen widen) {
  double s[4] = {0, 0, 0, 0}, a[4] = {0, 0, 0, 0};
  std::size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (std::size_t l = 0; l < 4; ++l) {
      const double t = gy[j + l] * widen(w, j + l);
      s[l] += t;
      a[l] += std::fabs(t);
    }
  }
  for (; j < n; ++j) {
    const double t = gy[j] * widen(w, j);
    s[0] += t;
    a[0] += std::fabs(t);
  }
  return {(s[0] + s[1]) + (s[2] + s[3]), (a[0] + a[1]) + (a[2] + a[3])};
}

struct Sample {
  std::size_t token;
  std::vector<Slot> slots;  // ascending rows
};

// Up to `max_tokens` tokens spread evenly over the batch, each with its rows.
std::vector<Sample> pick_samples(const ReferenceProblem& p, int64_t max_tokens) {
  const std::size_t batch = static_cast<std::size_t>(p.batch);
  const std::size_t count = static_cast<std::size_t>(std::min(max_tokens, p.batch));
  std::vector<Sample> samples(count);
  std::vector<std::ptrdiff_t> sample_of_token(batch, -1);
  for (std::size_t s = 0; s < count; ++s) {
    samples[s].token = count == 1 ? 0 : s * (batch - 1) / (count - 1);
    sample_of_token[samples[s].token] = static_cast<std::ptrdiff_t>(s);
  }
  std::size_t row = 0;
  for (std::size_t g = 0; g < static_cast<std::size_t>(p.experts); ++g) {
    for (const std::size_t end = row + static_cast<std::size_t>(p.group_list[g]); row < end;
         ++row) {
      if (p.expanded_row_idx[row] < 0) continue;  // a padding row
      const auto token = static_cast<std::size_t>(p.expanded_row_idx[row] / p.top_k);
      if (sample_of_token[token] >= 0) {
        samples[static_cast<std::size_t>(sample_of_token[token])].slots.push_back({row, g});
      }
    }
  }
  return samples;
}

template <class Widen>
ReferenceCheck check(const ReferenceProblem& p, const float* grad_x,
                     const std::vector<Sample>& samples, Widen widen, std::size_t elem_bytes) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t k_dim = static_cast<std::size_t>(p.k);
  const auto roundings = static_cast<double>(p.n + p.top_k);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto* weight = static_cast<const std::byte*>(p.weight);

  ReferenceCheck result;
  result.tokens = static_cast<int64_t>(samples.size());
  std::mutex merge;
  parallel_for(samples.size(), [&](uint64_t begin, uint64_t end) {
    ReferenceCheck local;
    std::vector<double> gy(n), sum(k_dim), abs_sum(k_dim);
    for (std::size_t s = begin; s < end; ++s) {
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
      for (const Slot& slot : samples[s].slots) {
        for (std::size_t j = 0; j < n; ++j) gy[j] = widen(p.grad_y, slot.row * n + j);
        for (std::size_t k = 0; k < k_dim; ++k) {
          const DotResult d =
              dot(gy.data(), weight + ((slot.expert * k_dim + k) * n) * elem_bytes, n, widen);
          sum[k] += d.sum;
          abs_sum[k] += d.abs_sum;
        }
      }
      for (std::size_t k = 0; k < k_dim; ++k) {
        const double err = std::fabs(grad_x[samples[s].token * k_dim + k] - sum[k]);
        const double bound = error_bound(roundings, abs_sum[k]);
        // A NaN output gives a NaN err; !(err <= bound) catches it.
        local.within_bound = local.within_bound && err <= bound;
        local.max_abs_error = std::max(local.max_abs_error, std::isnan(err) ? kInf : err);
        local.max_error_over_bound = std::max(local.max_error_over_bound, error_over_bound(err, bound));
      }
    }
    const std::lock_guard lock(merge);
    result.within_bound = result.within_bound && local.within_bound;
    result.max_abs_error = std::max(result.max_abs_error, local.max_abs_error);
    result.max_error_over_bound = std::max(result.max_error_over_bound, local.max_error_over_bound);
  });
  return result;
}

}  // namespace

ReferenceCheck check_against_float64(const ReferenceProblem& p, const float* grad_x,
                                     int64_t max_tokens) {
  const std::vector<Sample> samples = pick_samples(p, max_tokens);
  const std::size_t elem_bytes = static_cast<std::size_t>(format_bytes(p.format));
  return with_widening(p.format, [&](auto widen) { return check(p, grad_x, samples, widen, elem_bytes); });
}

}  // namespace moegrad::cli

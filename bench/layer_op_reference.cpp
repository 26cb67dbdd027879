#include "layer_op_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <mutex>
#include <vector>

#include "parallel_for.h"
#include "reference_check.h"

namespace moegrad::bench {
namespace {

// Index s of `count` spread over [0, size), the first and the last included.
size_t spread(size_t s, size_t count, size_t size) { return count <= 1 ? 0 : s * (size - 1) / (count - 1); }

// Compares out[0, n) with sum[0, n), each a chain of `len` roundings.
void compare_row(const float* out, const std::vector<double>& sum, const std::vector<double>& abs_sum, int64_t len,
                 LayerOpReferenceCheck* r) {
  for (size_t j = 0; j < sum.size(); ++j) {
    const double err = std::fabs(out[j] - sum[j]), bound = cli::error_bound(static_cast<double>(len), abs_sum[j]);
    r->within_bound = r->within_bound && err <= bound;  // false for a NaN
    r->max_error_over_bound = std::max(r->max_error_over_bound, cli::error_over_bound(err, bound));
  }
  r->elements += static_cast<int64_t>(sum.size());
}

}  // namespace

LayerOpReferenceCheck check_layer_op_against_float64(const LayerOpProblem& p, const float* out, int64_t samples) {
  const auto M = static_cast<size_t>(p.m), K = static_cast<size_t>(p.k), N = static_cast<size_t>(p.n),
             G = static_cast<size_t>(p.experts);
  std::vector<size_t> group_start(G + 1, 0);
  for (size_t g = 0; g < G; ++g) group_start[g + 1] = group_start[g] + static_cast<size_t>(p.group_list[g]);
  const bool forward = p.op == BenchOp::kForward;
  // Forward: sampled rows of y. Weight grad: sampled rows g * K + k of
  // grad_weight.
  const size_t rows_of_out = forward ? M : G * K;
  const size_t count = std::min(static_cast<size_t>(std::max<int64_t>(samples, 0)), rows_of_out);
  std::vector<size_t> rows(count);
  for (size_t s = 0; s < count; ++s) rows[s] = spread(s, count, rows_of_out);
  return cli::with_widening(p.format, [&](auto widen) {
    LayerOpReferenceCheck result;
    std::mutex merge;
    cli::parallel_for(rows.size(), [&](uint64_t begin, uint64_t end) {
      LayerOpReferenceCheck local;
      std::vector<double> sum(N), abs_sum(N);
      for (size_t s = begin; s < end; ++s) {
        std::fill(sum.begin(), sum.end(), 0.0);
        std::fill(abs_sum.begin(), abs_sum.end(), 0.0);
        // Products of two widened 24-bit significands are exact in double;
        // the sums' own rounding is far below the f32 bound.
        auto add = [&](double a, const void* b, size_t b0) {
          for (size_t j = 0; j < N; ++j) {
            const double t = a * widen(b, b0 + j);
            sum[j] += t;
            abs_sum[j] += std::fabs(t);
          }
        };
        int64_t len = 0;
        if (forward) {  // y[i, :] = sum over k of x[i, k] * weight[g(i), k, :]
          const size_t i = rows[s];
          const size_t g = static_cast<size_t>(std::upper_bound(group_start.begin(), group_start.end(), i) -
                                               group_start.begin()) - 1;
          for (size_t k = 0; k < K; ++k) add(widen(p.x, i * K + k), p.weight, (g * K + k) * N);
          len = p.k;
        } else {  // grad_weight[g, k, :] = sum over g's rows i of x[i, k] * grad_y[i, :]
          const size_t g = rows[s] / K, k = rows[s] % K;
          for (size_t i = group_start[g]; i < group_start[g + 1]; ++i) add(widen(p.x, i * K + k), p.grad_y, i * N);
          len = static_cast<int64_t>(group_start[g + 1] - group_start[g]);
        }
        compare_row(out + rows[s] * N, sum, abs_sum, len, &local);
      }
      const std::lock_guard lock(merge);
      result.elements += local.elements;
      result.within_bound = result.within_bound && local.within_bound;
      result.max_error_over_bound = std::max(result.max_error_over_bound, local.max_error_over_bound);
    });
    return result;
  });
}

}  // namespace moegrad::bench

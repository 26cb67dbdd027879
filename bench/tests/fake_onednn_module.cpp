// A stand-in for moegrad_bench_onednn.so (onednn_module.h) for the tests of
// `moegrad bench`'s cross-check: its "non-fused path" is float64 loops over
// the problem, rounded to f32, with one element then moved by a chosen
// fraction of max |grad_x| (MOEGRAD_TEST_FAKE_ONEDNN_ERROR, read at every
// run; 0 or unset: none; nan: the element becomes NaN). So a test can hand the command a baseline that
// agrees with the fused grad_x, one just inside the tolerance, and one
// outside it, with no hook in the command itself. The layer operators'
// baseline (`--op forward|weight-grad`) is float64 loops the same way, with
// the same error. f32 only.
#include <cmath>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "moegrad/moegrad.h"
#include "onednn_module.h"

namespace moegrad::bench {
namespace {

OnednnPrepare f32_only(cli::FloatFormat format, std::string* why) {
  if (format == cli::FloatFormat::kF32) return OnednnPrepare::kReady;
  *why = "the fake oneDNN module computes f32 only";
  return OnednnPrepare::kUnsupported;
}

// Stores the float64 sums as f32, then moves out[0] by
// MOEGRAD_TEST_FAKE_ONEDNN_ERROR times max |sum|.
void apply_error(const std::vector<double>& sum, float* out) {
  double max_abs = 0;
  for (size_t e = 0; e < sum.size(); ++e) {
    out[e] = static_cast<float>(sum[e]);
    max_abs = std::fmax(max_abs, std::fabs(sum[e]));
  }
  const char* error = std::getenv("MOEGRAD_TEST_FAKE_ONEDNN_ERROR");
  if (error != nullptr && !sum.empty()) out[0] = static_cast<float>(sum[0] + std::strtod(error, nullptr) * max_abs);
}

class FakeNonfused final : public OnednnBackend {
 public:
  OnednnPrepare prepare(const BenchProblem& p, int, std::string* why) noexcept override {
    p_ = p;
    return f32_only(p.format, why);
  }

  // grad_x[b, k] = sum over rows i of token b of sum_n grad_y[i, n] * W[g(i), k, n].
  bool run(float* grad_x, std::string* why) noexcept override {
    try {
      const auto* gy = static_cast<const float*>(p_.grad_y);
      const auto* w = static_cast<const float*>(p_.weight);
      std::vector<double> sum(static_cast<size_t>(p_.batch * p_.k), 0.0);
      int64_t i = 0;
      for (int64_t g = 0; g < p_.experts; ++g) {
        for (const int64_t end = i + p_.group_list[g]; i < end; ++i) {
          const int64_t pos = p_.expanded_row_idx[i];
          if (pos < 0) continue;  // padding
          for (int64_t k = 0; k < p_.k; ++k) {
            double dot = 0;
            for (int64_t n = 0; n < p_.n; ++n)
              dot += static_cast<double>(gy[i * p_.n + n]) * w[(g * p_.k + k) * p_.n + n];
            sum[static_cast<size_t>(pos / p_.top_k * p_.k + k)] += dot;
          }
        }
      }
      apply_error(sum, grad_x);
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
  }

  uint64_t workspace_bytes() const noexcept override {
    return static_cast<uint64_t>(p_.m) * static_cast<uint64_t>(p_.k) * 4;
  }

  std::string implementation() const override { return "float64 loops"; }

 private:
  BenchProblem p_;
};

class FakeLayerOp final : public OnednnLayerBackend {
 public:
  OnednnPrepare prepare(const LayerOpProblem& p, int, std::string* why) noexcept override {
    p_ = p;
    return f32_only(p.format, why);
  }

  // forward: y[i, n] = sum_k x[i, k] * W[g(i), k, n];
  // weight grad: grad_weight[g, k, n] = sum over rows i of g of x[i, k] * grad_y[i, n].
  bool run(std::string* why) noexcept override {
    try {
      const auto* x = static_cast<const float*>(p_.x);
      const bool forward = p_.op == BenchOp::kForward;
      std::vector<double> sum(static_cast<size_t>((forward ? p_.m : p_.experts * p_.k) * p_.n), 0.0);
      int64_t i = 0;
      for (int64_t g = 0; g < p_.experts; ++g) {
        for (const int64_t end = i + p_.group_list[g]; i < end; ++i) {
          for (int64_t k = 0; k < p_.k; ++k) {
            for (int64_t n = 0; n < p_.n; ++n) {
              const double xv = x[i * p_.k + k];
              if (forward) {
                sum[static_cast<size_t>(i * p_.n + n)] +=
                    xv * static_cast<const float*>(p_.weight)[(g * p_.k + k) * p_.n + n];
              } else {
                sum[static_cast<size_t>((g * p_.k + k) * p_.n + n)] +=
                    xv * static_cast<const float*>(p_.grad_y)[i * p_.n + n];
              }
            }
          }
        }
      }
      apply_error(sum, p_.out);
      return true;
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
  }

  uint64_t workspace_bytes() const noexcept override { return 0; }
  std::string implementation() const override { return "float64 loops"; }

 private:
  LayerOpProblem p_;
};

std::string version() { return "fake oneDNN (moegrad's tests)"; }
OnednnBackend* create() { return new FakeNonfused; }
OnednnLayerBackend* create_layer() { return new FakeLayerOp; }

constexpr OnednnModuleApi kApi{MOEGRAD_VERSION_STRING, version, create, create_layer};

}  // namespace
}  // namespace moegrad::bench

extern "C" const moegrad::bench::OnednnModuleApi* moegrad_bench_onednn_module_v2() { return &moegrad::bench::kApi; }

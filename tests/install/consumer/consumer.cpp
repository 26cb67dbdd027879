// The C++ side of the installed package (tests/install/install_test.sh):
// moegrad.hpp's RAII types over libmoegrad.so or .a, built as C++17, which is what
// most frameworks' extensions use. It checks that a refused argument throws
// moegrad::Error with its status, and that grad_x has the same bits with one
// thread and with two (SPEC §5) on a problem large enough to be split.
#include <moegrad/moegrad.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "consumer_data.h"

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer.cpp: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  // batch 64, top_k 2, 4 experts, K 96, N 40; slot p goes to expert
  // (p * 7) % 4 % 3, so expert 3 is empty.
  const int64_t batch = 64, top_k = 2, experts = 4, k_dim = 96, n_dim = 40, m = batch * top_k;
  std::vector<int64_t> counts(experts, 0), row_idx;
  for (int64_t g = 0; g < experts; ++g)
    for (int64_t p = 0; p < m; ++p)
      if ((p * 7) % 4 % 3 == g) row_idx.push_back(p);
  for (int64_t p = 0; p < m; ++p) ++counts[(p * 7) % 4 % 3];
  std::vector<float> grad_y(m * n_dim), weight(experts * k_dim * n_dim);
  consumer_fill(grad_y.data(), grad_y.size(), 3);
  consumer_fill(weight.data(), weight.size(), 5);

  int64_t gy_shape[2] = {m, n_dim}, w_shape[3] = {experts, k_dim, n_dim}, gx_shape[2] = {batch, k_dim};
  int64_t idx_shape[1] = {m}, gl_shape[1] = {experts};
  DLTensor gy = consumer_tensor(grad_y.data(), kDLFloat, 32, 2, gy_shape);
  DLTensor w = consumer_tensor(weight.data(), kDLFloat, 32, 3, w_shape);
  DLTensor idx = consumer_tensor(row_idx.data(), kDLInt, 64, 1, idx_shape);
  DLTensor gl = consumer_tensor(counts.data(), kDLInt, 64, 1, gl_shape);

  std::vector<float> one(batch * k_dim, std::numeric_limits<float>::quiet_NaN()), two = one;
  for (int threads : {1, 2}) {
    std::vector<float>& out = threads == 1 ? one : two;
    DLTensor gx = consumer_tensor(out.data(), kDLFloat, 32, 2, gx_shape);
    moegrad_grad_x_args args{&gy, &w, &idx, &gl, &gx, batch, top_k, MOEGRAD_ROW_IDX_EXPANDED_TO_ORIGINAL,
                             MOEGRAD_GROUP_LIST_COUNT};
    moegrad::Context ctx;
    ctx.set_num_threads(threads);
    moegrad::GradXExecutor ex(args, ctx);
    std::vector<unsigned char> ws(ex.workspace_bytes());
    ex.run(ws.data(), ws.size(), ctx);

    args.batch = 0;
    try {
      moegrad::grad_x(args, ctx);
      expect(false, "batch 0 was accepted");
    } catch (const moegrad::Error& e) {
      expect(e.status() == MOEGRAD_STATUS_BAD_BATCH, "batch 0: not MOEGRAD_STATUS_BAD_BATCH");
      expect(std::strstr(e.what(), "batch") != nullptr, "batch 0: the message does not name batch");
    }
  }
  bool finite = true;
  for (float v : one) finite = finite && std::isfinite(v);
  expect(finite, "grad_x has an element that was not written");
  expect(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0,
         "grad_x differs between 1 and 2 threads");

  // One element against float64: token 5, column 17.
  double ref = 0.0, abs_sum = 0.0;
  for (int64_t i = 0, row = 0; i < experts; ++i)
    for (int64_t c = 0; c < counts[i]; ++c, ++row)
      if (row_idx[row] / top_k == 5)
        for (int64_t n = 0; n < n_dim; ++n) {
          const double t = double(grad_y[row * n_dim + n]) * double(weight[(i * k_dim + 17) * n_dim + n]);
          ref += t;
          abs_sum += std::fabs(t);
        }
  expect(std::fabs(one[5 * k_dim + 17] - ref) <= (n_dim + top_k) * std::ldexp(1.0, -24) * abs_sum,
         "grad_x[5][17] is outside the bound of the float64 value");

  if (failures == 0) std::printf("consumer.cpp: moegrad %s OK\n", moegrad_version());
  return failures == 0 ? 0 : 1;
}

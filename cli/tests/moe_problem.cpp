#include "moe_problem.h"

namespace moegrad::cli_test {
namespace {

// A plain LCG: the test data needs only to be varied and reproducible.
int small_int(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<int>((state >> 33) % 7) - 3;
}

}  // namespace

MoeProblem make_problem(int64_t batch, int64_t top_k, int64_t experts, int64_t k, int64_t n,
                        uint64_t seed) {
  MoeProblem p{batch, top_k, experts, k, n, {}, {}, {}, {}, {}};
  const int64_t slots = batch * top_k;
  std::vector<int64_t> expert_of_position(static_cast<std::size_t>(slots));
  for (int64_t pos = 0; pos < slots; ++pos) {
    const bool dropped = pos % 7 == 3 || pos / top_k == batch - 1;
    expert_of_position[pos] =
        dropped ? -1 : (pos * 5 + pos / 3 + static_cast<int64_t>(seed)) % (experts - 1);
  }
  p.counts.assign(static_cast<std::size_t>(experts), 0);
  for (int64_t g = 0; g < experts; ++g) {
    for (int64_t pos = 0; pos < slots; ++pos) {
      if (expert_of_position[pos] != g) continue;
      p.position_of_row.push_back(pos);
      p.expert_of_row.push_back(g);
      ++p.counts[g];
    }
    if (g == 1) {
      p.position_of_row.push_back(-1);
      p.expert_of_row.push_back(g);
      ++p.counts[g];
    }
  }
  uint64_t state = seed;
  p.grad_y.resize(static_cast<std::size_t>(p.m() * n));
  for (int& v : p.grad_y) v = small_int(state);
  p.weight.resize(static_cast<std::size_t>(experts * k * n));
  for (int& v : p.weight) v = small_int(state);
  return p;
}

std::vector<int64_t> MoeProblem::row_idx_type0() const {
  std::vector<int64_t> idx = position_of_row;
  idx.push_back(123456789);
  idx.push_back(-5);
  return idx;
}

std::vector<int64_t> MoeProblem::row_idx_type1() const {
  std::vector<int64_t> idx(static_cast<std::size_t>(batch * top_k), -1);
  for (int64_t i = 0; i < m(); ++i) {
    if (position_of_row[i] >= 0) idx[position_of_row[i]] = i;
  }
  return idx;
}

std::vector<int64_t> MoeProblem::cumsum() const {
  std::vector<int64_t> c = counts;
  for (std::size_t g = 1; g < c.size(); ++g) c[g] += c[g - 1];
  return c;
}

std::vector<float> MoeProblem::expected_grad_x() const {
  std::vector<double> gx(static_cast<std::size_t>(batch * k), 0.0);
  for (int64_t i = 0; i < m(); ++i) {
    if (position_of_row[i] < 0) continue;
    const int64_t b = position_of_row[i] / top_k;
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t nn = 0; nn < n; ++nn) {
        gx[b * k + kk] +=
            static_cast<double>(grad_y[i * n + nn]) * weight[(expert_of_row[i] * k + kk) * n + nn];
      }
    }
  }
  return std::vector<float>(gx.begin(), gx.end());
}

}  // namespace moegrad::cli_test

#include "fma_peak.h"

#include <moegrad/moegrad.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "stats.h"

namespace moegrad::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The operands come through a volatile so the compiler cannot fold the loop.
// acc = acc*a + b converges to b / (1 - a) = 1000: no overflow, no denormals.
volatile float g_a = 0.999999f;
volatile float g_b = 0.001f;
volatile float g_sink = 0.0f;

// Runs `fn` on `threads` threads released together; returns
// {total flops, wall seconds from the release to the last finish}.
std::pair<double, double> run_on_threads(FmaLoopFn fn, int threads, uint64_t iterations) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<uint64_t> flops(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const float a = g_a, b = g_b;
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      float sink = 0.0f;
      flops[static_cast<size_t>(t)] = fn(iterations, a, b, &sink);
      g_sink = sink;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const Clock::time_point t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double total = 0;
  for (const uint64_t f : flops) total += static_cast<double>(f);
  return {total, seconds};
}

}  // namespace

FmaLoop::FmaLoop(int threads, moegrad_isa isa) : threads_(threads) {
  auto wanted = [isa](moegrad_isa loop) {
    return (isa == MOEGRAD_ISA_AUTO || isa == loop) && moegrad_isa_available(loop);
  };
  if (wanted(MOEGRAD_ISA_AVX512)) {
    fn_ = fma_loop_avx512;
    isa_ = moegrad_isa_name(MOEGRAD_ISA_AVX512);
  } else if (wanted(MOEGRAD_ISA_AVX2)) {
    fn_ = fma_loop_avx2;
    isa_ = moegrad_isa_name(MOEGRAD_ISA_AVX2);
  } else {
    return;
  }
  // Warm-up (clocks ramp up) that also sizes the loop to ~100 ms.
  constexpr uint64_t kProbe = 1u << 21;
  constexpr double kTargetSeconds = 0.1;
  const double probe_s = run_on_threads(fn_, threads_, kProbe).second;
  const double scale = kTargetSeconds / std::max(probe_s, 1e-6);
  iterations_ = std::clamp<uint64_t>(static_cast<uint64_t>(static_cast<double>(kProbe) * scale), kProbe / 16,
                                     kProbe * 1024);
}

void FmaLoop::run() {
  measure();
  keep_last();
}

void FmaLoop::measure() {
  if (fn_ == nullptr) return;
  const auto [flops, seconds] = run_on_threads(fn_, threads_, iterations_);
  last_gflops_ = flops / seconds * 1e-9;
}

void FmaLoop::keep_last() {
  if (last_gflops_) gflops_.push_back(*last_gflops_);
  last_gflops_.reset();
}

std::optional<double> FmaLoop::peak_gflops() const { return median_since(0); }

std::optional<double> FmaLoop::median_since(size_t first) const {
  if (first >= gflops_.size()) return std::nullopt;
  return summarize(std::vector<double>(gflops_.begin() + static_cast<std::ptrdiff_t>(first), gflops_.end())).median;
}

}  // namespace moegrad::bench

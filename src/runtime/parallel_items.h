// Dynamic hand-out of independent work items to a pool's workers, shared by
// grad-x and the layer operators (src/ops). Which worker gets which item
// changes nothing in any result: every caller's items write disjoint outputs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "runtime/fp_env.h"
#include "runtime/thread_pool.h"

namespace moegrad::runtime {

// Calls fn(item, worker) for item in [0, count) on at most `threads` workers,
// each under the IEEE floating-point environment (SPEC §5). fn must not
// throw (nothing the drivers call does): an exception ends the process.
template <typename Fn>
void parallel_items(ThreadPool& pool, int threads, int64_t count, Fn&& fn) {
  std::atomic<int64_t> next{0};
  const int workers = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(count, 1)));
  auto body = [&](int worker) noexcept {
    ScopedIeeeFpEnv fp_env;
    for (int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < count;
         item = next.fetch_add(1, std::memory_order_relaxed))
      fn(item, worker);
  };
  pool.run(workers, body);
}

}  // namespace moegrad::runtime

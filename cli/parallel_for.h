// One contiguous chunk of [0, count) per hardware thread. Used only where the
// result does not depend on the split (each index is computed independently),
// so the CLI's own work is deterministic whatever the core count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace moegrad::cli {

template <class Fn>  // fn(uint64_t begin, uint64_t end)
void parallel_for(uint64_t count, Fn fn) {
  const uint64_t workers =
      std::clamp<uint64_t>(std::thread::hardware_concurrency(), 1, std::max<uint64_t>(count, 1));
  if (workers == 1) {
    fn(uint64_t{0}, count);
    return;
  }
  std::vector<std::jthread> threads;
  threads.reserve(workers - 1);
  for (uint64_t w = 1; w < workers; ++w) {
    threads.emplace_back(
        [&fn, count, workers, w] { fn(count * w / workers, count * (w + 1) / workers); });
  }
  fn(uint64_t{0}, count / workers);
}

}  // namespace moegrad::cli

// One contiguous chunk of [0, count) per CPU this process may use. Used only
// where the result does not depend on the split (each index is computed
// independently), so the CLI's own work is deterministic whatever the core
// count, and whether or not the OS grants the helper threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/usable_cpus.h"

namespace moegrad::cli {

template <class Fn>  // fn(uint64_t begin, uint64_t end)
void parallel_for(uint64_t count, Fn fn) {
  // The affinity mask and CPU limit, as a context's default threads: not
  // the online CPUs, which a container or taskset may not grant (nor a
  // garbled /sys report of them).
  const auto usable = static_cast<uint64_t>(runtime::usable_cpus());
  const uint64_t workers = std::clamp<uint64_t>(usable, 1, std::max<uint64_t>(count, 1));
  auto chunk = [&fn, count, workers](uint64_t w) { fn(count * w / workers, count * (w + 1) / workers); };
  std::vector<std::jthread> threads;
  threads.reserve(workers - 1);
  uint64_t started = 1;
  try {
    for (; started < workers; ++started) threads.emplace_back(chunk, started);
  } catch (const std::system_error&) {
    // The OS refused a thread (a pids or RLIMIT_NPROC limit, no memory for
    // its stack): the caller runs the chunks no thread took.
  }
  for (uint64_t w = started; w < workers; ++w) chunk(w);
  chunk(0);
}

}  // namespace moegrad::cli

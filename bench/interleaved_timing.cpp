#include "interleaved_timing.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

namespace moegrad::bench {
namespace {

// Idle time before each run, so worker threads that the previous run left
// spinning (OpenMP's default wait policy, under oneDNN) are asleep again and
// every run starts from the same state.
constexpr std::chrono::milliseconds kSettle{20};

// The idle costs the run after it a roughly fixed time: `moegrad bench
// --shape 64,2,4,64,32 --dtype f32 --threads 1 --reps 21` read the fused
// call at 0.032-0.040 ms after the idle alone, 0.038-0.040 ms after the
// idle and a 2 ms busy spin, and 0.010-0.011 ms right after an untimed
// run, so it is the caches the idle loses, not the clock; at 12 ms a call
// the difference was lost in noise (a review's ab_compare). It also costs
// a multi-thread path its threads' places: after it, a woken thread may be
// put on the CPU of the thread that woke it (runtime/thread_pool.cpp says
// when), and a single untimed run is too short for the kernel to move it
// (512,2,8,512,512, fused, 2 threads, while making this: 2.35 ms after one
// untimed run, 1.65 ms after 10 ms of them). So a path whose warm-up run
// was shorter than kPrimeBelowMs runs untimed, one run after another (with
// whatever untimed set-up a run has between them), until their times add
// up to kPrimeForMs (at least 2 ticks of a 250 Hz kernel), right before
// each timed run, and is timed as a caller calling it in a loop would see
// it. The warm-up decides for all rounds: a path near 20 ms a call,
// decided round by round, would mix rounds of both kinds in its median.
constexpr double kPrimeBelowMs = 20.0;
constexpr double kPrimeForMs = 10.0;
// A path's first run also pays for the first touch of what its prepare()
// allocated, which later runs do not: a non-fused baseline's 4*M*K
// d_expanded_x, against the fused path's workspace of a few MiB. Judged by
// that run alone, a baseline under kPrimeBelowMs a call could go unprimed
// beside a primed fused path (found by a review). So a warm-up run under
// kSecondLookBelowMs, but not under kPrimeBelowMs, is followed by another,
// and the faster of the two decides; a longer one cannot be a short call.
constexpr double kSecondLookBelowMs = 100.0;
// Paths are compared with each other (fused with oneDNN, one thread count
// with another), so they are timed alike: where one is primed, so is every
// other whose warm-up ran under kSecondLookBelowMs (priming it costs one
// untimed run a round). Else a fused call of 18 ms would be timed primed
// beside a baseline of 22 ms timed straight after the idle, which the idle
// costs up to the 0.7 ms above (found by a review).

double settled_run(TimedPath& path) {
  std::this_thread::sleep_for(kSettle);
  if (path.primed)
    for (double untimed = 0; untimed < kPrimeForMs;) untimed += path.run();
  return path.run();
}

}  // namespace

double warm_up(const std::vector<TimedPath*>& paths) {
  const Clock::time_point t0 = Clock::now();
  double second_looks_ms = 0;  // what a round does not repeat
  std::vector<double> warm_ms;
  bool any_short = false;
  for (TimedPath* p : paths) {
    p->primed = false;
    double ms = settled_run(*p);
    if (ms >= kPrimeBelowMs && ms < kSecondLookBelowMs) {
      const Clock::time_point t1 = Clock::now();
      ms = std::min(ms, settled_run(*p));
      second_looks_ms += ms_since(t1);
    }
    warm_ms.push_back(ms);
    any_short = any_short || (p->may_prime && ms < kPrimeBelowMs);
  }
  double priming_ms = 0;  // what each round adds to the warm-up's runs
  for (size_t i = 0; i < paths.size(); ++i) {
    const double ms = warm_ms[i];
    paths[i]->primed = paths[i]->may_prime && (ms < kPrimeBelowMs || (any_short && ms < kSecondLookBelowMs));
    if (paths[i]->primed) priming_ms += std::max(kPrimeForMs, ms);  // runs until they add up to 10 ms
  }
  return (ms_since(t0) - second_looks_ms + priming_ms) / 1e3;
}

// Rotating the start (not only interleaving) matters: drift in the shared
// host's speed (several % over seconds here) would otherwise land on
// whichever path runs last in every round.
void time_interleaved(std::vector<TimedPath*>& paths, int reps) {
  std::vector<std::vector<double>> ms(paths.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < paths.size(); ++i) {
      const size_t j = (i + static_cast<size_t>(r)) % paths.size();
      ms[j].push_back(settled_run(*paths[j]));
      if (paths[j]->kept) paths[j]->kept();
    }
  for (size_t j = 0; j < paths.size(); ++j) paths[j]->ms = summarize(std::move(ms[j]));
}

std::vector<TimedPath> fma_loop_paths(const std::vector<FmaLoop*>& loops) {
  std::vector<TimedPath> paths;
  for (FmaLoop* loop : loops) {
    if (!loop->available()) continue;
    paths.push_back({[] { return true; },
                     [loop] {
                       const Clock::time_point t0 = Clock::now();
                       loop->measure();
                       return ms_since(t0);
                     },
                     [] {},
                     {},
                     false,
                     [loop] { loop->keep_last(); },
                     false});  // ~100 ms of FMAs on registers: nothing to warm
  }
  return paths;
}

// The run's fma-peak (one figure per thread count, as the JSON has it)
// mixes every shape's minutes; a shape's own say how fast the host was
// while it was timed.
std::string fma_loop_note(const std::vector<FmaLoop*>& loops, const std::vector<size_t>& runs_before) {
  std::string own;
  for (size_t i = 0; i < loops.size(); ++i) {
    const std::optional<double> g = loops[i]->median_since(runs_before[i]);
    if (!g) continue;
    char gflops[32];
    std::snprintf(gflops, sizeof gflops, "%.1f", *g);
    own += (own.empty() ? "" : ", ") + std::to_string(loops[i]->threads()) +
           (loops[i]->threads() == 1 ? " thread " : " threads ") + gflops + " GFLOP/s";
  }
  if (own.empty()) return own;
  return "the FMA loop in this shape's rounds: " + own + " (%peak is against the whole run's fma-peak)";
}

}  // namespace moegrad::bench

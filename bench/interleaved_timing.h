// How `moegrad bench` times its paths: each run after a short idle (and,
// for a path whose warm-up took under 20 ms, and then every other path
// under 100 ms too, right after untimed runs of it whose times add up to
// 10 ms), a warm-up round (a path between 20 and 100
// ms warms up twice, and the faster run counts: a first run also touches
// new buffers), then rounds that run every path once, interleaved and
// rotated, so drift in a shared host's speed lands on every path alike.
// Both the grad-x runner and the layer operators' one use it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "stats.h"

namespace moegrad::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A path the bench times. prepare() allocates what it needs (untimed) and
// returns false when the path cannot run here (its row is then null);
// run() runs it once and returns its milliseconds; release() frees what
// prepare() took; kept(), where set, is called right after each run whose
// time goes into ms (not after the warm-up's runs nor the untimed ones).
struct TimedPath {
  std::function<bool()> prepare;
  std::function<double()> run;
  std::function<void()> release;
  Stats ms;
  bool primed = false;  // set by warm_up: each timed run follows 10 ms of untimed ones
  std::function<void()> kept{};
  bool may_prime = true;  // false: never primed, nor a reason to prime the others
};

// Runs each path once (twice between 20 and 100 ms), as the warm-up of
// time_interleaved; returns the seconds that took plus the untimed runs
// each round will add (what a round of them takes).
double warm_up(const std::vector<TimedPath*>& paths);

// `reps` rounds, each running every path once, starting one path later each
// round; each path's Stats are set from its rounds.
void time_interleaved(std::vector<TimedPath*>& paths, int reps);

// The FMA loops as paths of a shape's rounds (those that can run here), so
// the peak is measured in the same minutes as the paths. A loop keeps the
// speed of its timed runs only, as a path's median has only those.
std::vector<TimedPath> fma_loop_paths(const std::vector<FmaLoop*>& loops);

// The loops' speed in one shape's rounds (each loop's runs from
// runs_before[i] on) as a note: "the FMA loop in this shape's rounds: 1
// thread 225.1 GFLOP/s, ...", or "" when no loop ran.
std::string fma_loop_note(const std::vector<FmaLoop*>& loops, const std::vector<size_t>& runs_before);

}  // namespace moegrad::bench

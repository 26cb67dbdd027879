// The CPU's model name, for reports (`moegrad bench`, `moegrad info`).
#pragma once

#include <string>

namespace moegrad::bench {

// "model name" from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model();

}  // namespace moegrad::bench

// The CPU's model name, for reports only (`moegrad bench`, `moegrad info`,
// moegrad.info() in Python); nothing is decided from it.
#pragma once

#include <string>

namespace moegrad::runtime {

// "model name" from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model();

}  // namespace moegrad::runtime

// The CPU's model name, for reports only (`moegrad bench`, `moegrad info`,
// moegrad.info() in Python); nothing is decided from it.
#pragma once

#include <string>

namespace moegrad::runtime {

// The value of the first /proc/cpuinfo line whose key (the text before its
// ':', trailing blanks dropped) is `key`, blanks trimmed; empty when there
// is none or the file cannot be read.
std::string cpuinfo_field(const char* key);

// "model name" from /proc/cpuinfo, or "unknown CPU".
std::string cpu_model();

}  // namespace moegrad::runtime

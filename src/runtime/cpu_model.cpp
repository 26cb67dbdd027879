#include "runtime/cpu_model.h"

#include <cstdio>
#include <cstring>

namespace moegrad::runtime {

std::string cpuinfo_field(const char* key) {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return {};
  char line[512];
  std::string value;
  const size_t key_len = std::strlen(key);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    const char* colon = std::strchr(line, ':');
    if (colon == nullptr || std::strncmp(line, key, key_len) != 0) continue;
    // Only blanks between the key and the colon ("model" is not "model name").
    if (std::strspn(line + key_len, " \t") != static_cast<size_t>(colon - line) - key_len) continue;
    value = colon + 1;
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r\n") + 1);
    break;
  }
  std::fclose(f);
  return value;
}

std::string cpu_model() {
  std::string model = cpuinfo_field("model name");
  return model.empty() ? "unknown CPU" : model;
}

}  // namespace moegrad::runtime

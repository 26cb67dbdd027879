#include "runtime/cpu_model.h"

#include <cstdio>
#include <cstring>

namespace moegrad::runtime {

std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "unknown CPU";
  char line[512];
  std::string model = "unknown CPU";
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "model name", 10) != 0) continue;
    const char* colon = std::strchr(line, ':');
    if (colon == nullptr) continue;
    model = colon + 1;
    model.erase(0, model.find_first_not_of(" \t"));
    model.erase(model.find_last_not_of(" \t\r\n") + 1);
    break;
  }
  std::fclose(f);
  return model;
}

}  // namespace moegrad::runtime

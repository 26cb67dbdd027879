// `moegrad bench`: the benchmark table of SPEC §8, implemented in bench/.
#include "bench_command.h"
#include "commands.h"

namespace moegrad::cli {

int cmd_bench(std::span<char* const> args) {
  return moegrad::bench::run_bench_command(static_cast<int>(args.size()), const_cast<char**>(args.data()));
}

}  // namespace moegrad::cli

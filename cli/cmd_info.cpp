// moegrad info: what this build and machine give the library, for bug
// reports and for reading benchmarks: the version, the CPU, the ISA path a
// context picks and those this CPU can run, the thread count and the CPUs
// its default comes from, the memory `run` and `bench` size their buffers
// by, the cache sizes the blocks are fitted to (and what
// the OS reports), the GEMM engine, the MOEGRAD_* variables set, and whether
// `moegrad bench` can load its oneDNN baseline. Everything comes from a
// context created as any user's would be, so a malformed variable fails here
// exactly as it would there.
#include <moegrad/moegrad.h>

#include <cstdio>
#include <moegrad/moegrad.hpp>
#include <optional>
#include <string>

#include "api/context.h"
#include "cli_error.h"
#include "commands.h"
#include "flags.h"
#include "json_string.h"
#include "onednn_nonfused.h"
#include "peak_rss.h"
#include "runtime/cgroup_memory_headroom.h"

namespace moegrad::cli {
namespace {

constexpr char kHelp[] =
    "Usage: moegrad info [--json]\n"
    "\n"
    "Prints what the library sees on this machine: the version, the CPU, the ISA\n"
    "path a context picks and the paths this CPU can run (and AVX512_BF16), the\n"
    "thread count and what its default comes from (the CPUs in the affinity mask,\n"
    "narrowed by a cgroup CPU limit such as docker run --cpus sets), the memory\n"
    "`run` and `bench` size their buffers by (MemAvailable, or the memory\n"
    "cgroup's limit less its use where that is less, as docker run --memory\n"
    "sets), the per-core\n"
    "cache sizes the blocks are fitted to (and what the OS reports), the GEMM\n"
    "engine, the MOEGRAD_* variables that are set (an 'ignored' line, in JSON\n"
    "ignored_environment, for each other MOEGRAD_* name set, which the library\n"
    "does not read, with the variable it may be a misspelling of), and whether\n"
    "`moegrad bench` can load its oneDNN baseline.\n"
    "Attach it to bug reports and benchmark results.\n"
    "\n"
    "  --json   one JSON object instead of the text\n";

struct Info {
  std::string onednn, onednn_unavailable;
  ContextInfo context;
  std::optional<bench::AvailableMemory> memory;
  std::optional<uint64_t> cgroup_memory_headroom;
};

Info gather() {
  Info info;
  const moegrad::Context ctx;  // throws moegrad::Error on a malformed variable
  info.context = describe_context(*ctx.get());
  info.onednn = bench::OnednnNonfused::version();
  if (info.onednn.empty()) info.onednn_unavailable = bench::OnednnNonfused::unavailable_reason();
  info.memory = bench::available_memory();
  info.cgroup_memory_headroom = runtime::cgroup_memory_headroom();
  return info;
}

std::string kib(size_t bytes) { return bytes == 0 ? "none" : std::to_string(bytes / 1024) + " KiB"; }

void print_human(const Info& info) {
  const ContextInfo& c = info.context;
  std::printf("moegrad %s\n", moegrad_version());
  std::printf("  cpu        %s\n", c.cpu.c_str());
  std::string isas;
  for (const char* isa : c.isa_available) isas += std::string(isas.empty() ? "" : " ") + isa;
  // The mode runs on the avx512 path with the instruction, or emulated on
  // the scalar one: a context on avx2 refuses it whatever the CPU has.
  const char* fast_bf16 = !c.avx512bf16 ? "no" : c.isa == MOEGRAD_ISA_AVX2 ? "yes, on avx512 only" : "yes";
  std::printf("  isa        %s (this CPU runs: %s; AVX512_BF16 for fast bf16: %s)\n", moegrad_isa_name(c.isa),
              isas.c_str(), fast_bf16);
  std::printf("  threads    %d\n", c.threads);
  char limit[64] = "no cgroup CPU limit";
  if (c.cpus.cgroup_limit) std::snprintf(limit, sizeof limit, "a cgroup CPU limit of %.2f", *c.cpus.cgroup_limit);
  std::printf("  cpus       %lld in the affinity mask, %s: %lld usable, the default without MOEGRAD_NUM_THREADS\n",
              static_cast<long long>(c.cpus.affinity), limit, static_cast<long long>(c.cpus.usable()));
  if (info.memory) {
    std::printf("  memory     %.2f GiB available (%s), what run and bench size their buffers by\n",
                static_cast<double>(info.memory->bytes) / (uint64_t{1} << 30), info.memory->source());
  } else {
    std::printf("  memory     unknown: no MemAvailable in /proc/meminfo, no cgroup memory limit\n");
  }
  std::printf("  caches     L1d %s, L2 %s per core (the OS reports %s, %s; blocks are sized\n"
              "             for at most %s, %s)\n",
              kib(c.caches.l1d).c_str(), kib(c.caches.l2).c_str(), kib(c.os_l1d).c_str(), kib(c.os_l2).c_str(),
              kib(c.caches_cap.l1d).c_str(), kib(c.caches_cap.l2).c_str());
  std::printf("  engine     %s\n", c.engine);
  std::string set;
  for (const auto& [name, value] : c.environment) {
    if (value) set += std::string(set.empty() ? "" : " ") + name + "=" + *value;
  }
  std::printf("  env        %s\n", set.empty() ? "no MOEGRAD_* variable set" : set.c_str());
  for (const auto& [name, closest] : c.ignored_environment) {
    std::printf("  ignored    %s: moegrad reads no such variable%s%s%s\n", name.c_str(), closest ? " (" : "",
                closest ? closest : "", closest ? "?)" : "");
  }
  if (info.onednn.empty()) {
    std::printf("  onednn     not available to moegrad bench: %s\n", info.onednn_unavailable.c_str());
  } else {
    std::printf("  onednn     %s (moegrad bench's baseline)\n", info.onednn.c_str());
  }
}

void print_json(const Info& info) {
  const ContextInfo& c = info.context;
  auto key = [](const char* k) { std::printf(",\n  \"%s\": ", k); };
  auto text = [](const std::string& s) { write_json_string(stdout, s); };
  auto bytes_or_null = [](size_t b) { b == 0 ? std::printf("null") : std::printf("%zu", b); };
  std::printf("{\n  \"version\": ");
  text(moegrad_version());
  key("cpu");
  text(c.cpu);
  key("isa");
  text(moegrad_isa_name(c.isa));
  key("isa_available");
  std::printf("[");
  for (size_t i = 0; i < c.isa_available.size(); ++i) {
    if (i) std::printf(", ");
    text(c.isa_available[i]);
  }
  std::printf("]");
  key("avx512_bf16");
  std::printf(c.avx512bf16 ? "true" : "false");
  key("threads");
  std::printf("%d", c.threads);
  key("affinity_cpus");
  std::printf("%lld", static_cast<long long>(c.cpus.affinity));
  key("cgroup_cpu_limit");
  c.cpus.cgroup_limit ? std::printf("%.6g", *c.cpus.cgroup_limit) : std::printf("null");
  key("usable_cpus");
  std::printf("%lld", static_cast<long long>(c.cpus.usable()));
  key("memory_available_bytes");
  info.memory ? std::printf("%llu", static_cast<unsigned long long>(info.memory->bytes)) : std::printf("null");
  key("cgroup_memory_headroom_bytes");
  info.cgroup_memory_headroom
      ? std::printf("%llu", static_cast<unsigned long long>(*info.cgroup_memory_headroom))
      : std::printf("null");
  key("engine");
  text(c.engine);
  key("l1d_bytes");
  std::printf("%zu", c.caches.l1d);
  key("l2_bytes");
  std::printf("%zu", c.caches.l2);
  key("os_l1d_bytes");
  bytes_or_null(c.os_l1d);
  key("os_l2_bytes");
  bytes_or_null(c.os_l2);
  key("environment");
  std::printf("{");
  const char* sep = "";
  for (const auto& [name, value] : c.environment) {
    std::printf("%s\"%s\": ", sep, name);
    value ? text(*value) : static_cast<void>(std::printf("null"));
    sep = ", ";
  }
  std::printf("}");
  key("ignored_environment");
  std::printf("{");
  sep = "";
  for (const auto& [name, closest] : c.ignored_environment) {
    std::printf("%s", sep);
    text(name);
    std::printf(": ");
    closest ? text(closest) : static_cast<void>(std::printf("null"));
    sep = ", ";
  }
  std::printf("}");
  key("onednn");
  info.onednn.empty() ? static_cast<void>(std::printf("null")) : text(info.onednn);
  key("onednn_unavailable");
  info.onednn.empty() ? text(info.onednn_unavailable) : static_cast<void>(std::printf("null"));
  std::printf("\n}\n");
}

}  // namespace

int cmd_info(std::span<char* const> args) {
  static constexpr FlagSpec kSpecs[] = {{"--json", false}};
  const ParsedFlags flags = ParsedFlags::parse("info", kSpecs, args);
  if (flags.help()) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  const Info info = gather();
  if (flags.has("--json")) {
    print_json(info);
  } else {
    print_human(info);
  }
  return kExitOk;
}

}  // namespace moegrad::cli

// moegrad info: what this build and machine give the library, for bug
// reports and for reading benchmarks: the version, the CPU, the ISA path a
// context picks and those this CPU can run, the default thread count, the
// cache sizes the blocks are fitted to (and what the OS reports), the GEMM
// engine, the MOEGRAD_* variables set, and whether `moegrad bench` can load
// its oneDNN baseline. Everything comes from a context created as any user's
// would be, so a malformed variable fails here exactly as it would there.
#include <moegrad/moegrad.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <moegrad/moegrad.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/context.h"
#include "cli_error.h"
#include "commands.h"
#include "cpu_model.h"
#include "flags.h"
#include "json_string.h"
#include "onednn_nonfused.h"
#include "runtime/cpu_features.h"

namespace moegrad::cli {
namespace {

constexpr char kHelp[] =
    "Usage: moegrad info [--json]\n"
    "\n"
    "Prints what the library sees on this machine: the version, the CPU, the ISA\n"
    "path a context picks and the paths this CPU can run (and AVX512_BF16), the\n"
    "default thread count, the per-core cache sizes the blocks are fitted to (and\n"
    "what the OS reports), the GEMM engine, the MOEGRAD_* variables that are set,\n"
    "and whether `moegrad bench` can load its oneDNN baseline. Attach it to bug\n"
    "reports and benchmark results.\n"
    "\n"
    "  --json   one JSON object instead of the text\n";

constexpr std::array<const char*, 5> kVariables = {"MOEGRAD_NUM_THREADS", "MOEGRAD_ISA", "MOEGRAD_ENGINE",
                                                   "MOEGRAD_L1D_BYTES", "MOEGRAD_L2_BYTES"};

struct Info {
  std::string cpu, isa, engine, onednn, onednn_unavailable;
  std::vector<std::string> isas;                      // the paths this CPU runs
  bool avx512bf16 = false;                            // vdpbf16ps, for the fast bf16 mode
  int threads = 1;
  size_t l1d = 0, l2 = 0;                             // what the context fits blocks to
  size_t os_l1d = 0, os_l2 = 0;                       // what the OS reports (0: nothing)
  std::vector<std::optional<std::string>> variables;  // kVariables' values
};

const char* engine_name(plan::Engine e) {
  switch (e) {
    case plan::Engine::kAuto: return "auto";
    case plan::Engine::kPacked: return "packed";
    case plan::Engine::kRowvec: return "rowvec";
  }
  return "?";
}

Info gather() {
  Info info;
  const moegrad::Context ctx;  // throws moegrad::Error on a malformed variable
  const moegrad_context& c = *ctx.get();
  info.cpu = bench::cpu_model();
  info.isa = moegrad_isa_name(ctx.isa());
  for (const moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (moegrad_isa_available(isa)) info.isas.emplace_back(moegrad_isa_name(isa));
  }
  const runtime::CpuFeatures& cpu = runtime::cpu_features();
  info.avx512bf16 = cpu.avx512bf16;
  info.threads = ctx.num_threads();
  info.engine = engine_name(c.engine);
  info.l1d = c.caches.l1d;
  info.l2 = c.caches.l2;
  info.os_l1d = cpu.l1d_bytes;
  info.os_l2 = cpu.l2_bytes;
  for (const char* name : kVariables) {
    const char* value = std::getenv(name);
    info.variables.push_back(value != nullptr ? std::optional<std::string>(value) : std::nullopt);
  }
  info.onednn = bench::OnednnNonfused::version();
  if (info.onednn.empty()) info.onednn_unavailable = bench::OnednnNonfused::unavailable_reason();
  return info;
}

std::string kib(size_t bytes) { return bytes == 0 ? "none" : std::to_string(bytes / 1024) + " KiB"; }

void print_human(const Info& info) {
  std::printf("moegrad %s\n", moegrad_version());
  std::printf("  cpu        %s\n", info.cpu.c_str());
  std::string isas;
  for (const std::string& isa : info.isas) isas += (isas.empty() ? "" : " ") + isa;
  std::printf("  isa        %s (this CPU runs: %s; AVX512_BF16 for fast bf16: %s)\n", info.isa.c_str(),
              isas.c_str(), info.avx512bf16 ? "yes" : "no");
  std::printf("  threads    %d\n", info.threads);
  const plan::CacheSizes most;
  std::printf("  caches     L1d %s, L2 %s per core (the OS reports %s, %s; blocks are sized\n"
              "             for at most %s, %s)\n",
              kib(info.l1d).c_str(), kib(info.l2).c_str(), kib(info.os_l1d).c_str(), kib(info.os_l2).c_str(),
              kib(most.l1d).c_str(), kib(most.l2).c_str());
  std::printf("  engine     %s\n", info.engine.c_str());
  std::string set;
  for (size_t i = 0; i < kVariables.size(); ++i) {
    if (info.variables[i]) set += std::string(set.empty() ? "" : " ") + kVariables[i] + "=" + *info.variables[i];
  }
  std::printf("  env        %s\n", set.empty() ? "no MOEGRAD_* variable set" : set.c_str());
  if (info.onednn.empty()) {
    std::printf("  onednn     not available to moegrad bench: %s\n", info.onednn_unavailable.c_str());
  } else {
    std::printf("  onednn     %s (moegrad bench's baseline)\n", info.onednn.c_str());
  }
}

void print_json(const Info& info) {
  auto key = [](const char* k) { std::printf(",\n  \"%s\": ", k); };
  auto text = [](const std::string& s) { write_json_string(stdout, s); };
  auto bytes_or_null = [](size_t b) { b == 0 ? std::printf("null") : std::printf("%zu", b); };
  std::printf("{\n  \"version\": ");
  text(moegrad_version());
  key("cpu");
  text(info.cpu);
  key("isa");
  text(info.isa);
  key("isa_available");
  std::printf("[");
  for (size_t i = 0; i < info.isas.size(); ++i) {
    if (i) std::printf(", ");
    text(info.isas[i]);
  }
  std::printf("]");
  key("avx512_bf16");
  std::printf(info.avx512bf16 ? "true" : "false");
  key("threads");
  std::printf("%d", info.threads);
  key("engine");
  text(info.engine);
  key("l1d_bytes");
  std::printf("%zu", info.l1d);
  key("l2_bytes");
  std::printf("%zu", info.l2);
  key("os_l1d_bytes");
  bytes_or_null(info.os_l1d);
  key("os_l2_bytes");
  bytes_or_null(info.os_l2);
  key("environment");
  std::printf("{");
  for (size_t i = 0; i < kVariables.size(); ++i) {
    std::printf("%s\"%s\": ", i ? ", " : "", kVariables[i]);
    info.variables[i] ? text(*info.variables[i]) : static_cast<void>(std::printf("null"));
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

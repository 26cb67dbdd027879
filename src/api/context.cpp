#include "api/context.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/gemm_kernels.h"
#include "runtime/cpu_features.h"
#include "runtime/cpu_model.h"
#include "runtime/usable_cpus.h"

namespace moegrad {
namespace {

// A pool larger than this is a typo, not a machine.
constexpr int32_t kMaxThreads = MOEGRAD_MAX_THREADS;

// One worker per CPU this thread may use (runtime/usable_cpus.h).
int32_t default_thread_count() {
  const int64_t n = runtime::usable_cpus();
  return static_cast<int32_t>(n < kMaxThreads ? n : kMaxThreads);
}

// The value the environment variable `var` names, from `names` (N choices);
// INVALID_ARGUMENT listing them otherwise. The list is joined in a fixed
// buffer: a std::string's bad_alloc would leave moegrad_context_create, a
// C function, as an exception.
template <class T, size_t N>
moegrad_status parse_choice(const char* var, const char* text, const std::pair<const char*, T> (&names)[N], T* out) {
  for (const auto& [name, value] : names) {
    if (std::strcmp(text, name) == 0) {
      *out = value;
      return MOEGRAD_STATUS_SUCCESS;
    }
  }
  char choices[128] = "";
  size_t used = 0;
  for (size_t i = 0; i < N && used < sizeof choices; ++i)
    used += static_cast<size_t>(
        std::snprintf(choices + used, sizeof choices - used, "%s%s", i == 0 ? "" : ", ", names[i].first));
  return fail(MOEGRAD_STATUS_INVALID_ARGUMENT, "%s='%s' is not one of %s", var, text, choices);
}

moegrad_status parse_isa(const char* text, moegrad_isa* isa) {
  static const std::pair<const char*, moegrad_isa> kNames[] = {
      {"auto", MOEGRAD_ISA_AUTO}, {"scalar", MOEGRAD_ISA_SCALAR}, {"avx2", MOEGRAD_ISA_AVX2}, {"avx512", MOEGRAD_ISA_AVX512}};
  return parse_choice("MOEGRAD_ISA", text, kNames, isa);
}

constexpr std::pair<const char*, plan::Engine> kEngineNames[] = {
    {"auto", plan::Engine::kAuto}, {"packed", plan::Engine::kPacked}, {"rowvec", plan::Engine::kRowvec}};

moegrad_status parse_engine(const char* text, plan::Engine* engine) {
  return parse_choice("MOEGRAD_ENGINE", text, kEngineNames, engine);
}

// A decimal count from the environment variable `name`, if set (else
// *value is left as it is): digits only, as strtoull alone would skip spaces
// and take a sign, and in [lo, hi]. `noun` names what it counts.
moegrad_status parse_env_count(const char* name, const char* noun, unsigned long long lo, unsigned long long hi,
                               unsigned long long* value) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return MOEGRAD_STATUS_SUCCESS;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(env, &end, 10);
  if (env[0] < '0' || env[0] > '9' || errno != 0 || *end != '\0' || n < lo || n > hi)
    return fail(MOEGRAD_STATUS_INVALID_ARGUMENT, "%s='%s' is not %s in [%llu, %llu]", name, env, noun, lo, hi);
  *value = n;
  return MOEGRAD_STATUS_SUCCESS;
}

// A cache size in bytes from the environment variable `name`, if set.
moegrad_status parse_cache_bytes(const char* name, size_t lo, size_t hi, size_t* bytes) {
  unsigned long long n = *bytes;
  if (auto s = parse_env_count(name, "a number of bytes", lo, hi, &n)) return s;
  *bytes = static_cast<size_t>(n);
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status resolve_isa(moegrad_isa requested, moegrad_isa* resolved) {
  if (requested == MOEGRAD_ISA_AUTO) {
    *resolved = kernels::best_isa();
    return MOEGRAD_STATUS_SUCCESS;
  }
  if (requested != MOEGRAD_ISA_SCALAR && requested != MOEGRAD_ISA_AVX2 &&
      requested != MOEGRAD_ISA_AVX512)
    return fail(MOEGRAD_STATUS_INVALID_ARGUMENT, "isa %d is not a moegrad_isa value",
                static_cast<int>(requested));
  if (kernels::gemm_kernels_for(requested) == nullptr)
    return fail(MOEGRAD_STATUS_ISA_UNAVAILABLE,
                "isa %s was forced but this CPU/OS does not support it (best available: %s)",
                moegrad_isa_name(requested), moegrad_isa_name(kernels::best_isa()));
  *resolved = requested;
  return MOEGRAD_STATUS_SUCCESS;
}

// Fills ctx's settings from the CPU and the environment (kContextVariables).
moegrad_status read_context_env(moegrad_context* ctx) {
  ctx->default_threads = default_thread_count();
  unsigned long long threads = static_cast<unsigned long long>(ctx->default_threads);
  if (auto s = parse_env_count("MOEGRAD_NUM_THREADS", "an integer", 1, kMaxThreads, &threads)) return s;
  ctx->default_threads = static_cast<int32_t>(threads);
  ctx->num_threads = ctx->default_threads;
  moegrad_isa requested = MOEGRAD_ISA_AUTO;
  if (const char* env = std::getenv("MOEGRAD_ISA"); env != nullptr && *env != '\0') {
    if (moegrad_status s = parse_isa(env, &requested); s != MOEGRAD_STATUS_SUCCESS) return s;
  }
  moegrad_isa resolved = MOEGRAD_ISA_SCALAR;
  if (moegrad_status s = resolve_isa(requested, &resolved); s != MOEGRAD_STATUS_SUCCESS) return s;
  ctx->isa = resolved;
  if (const char* env = std::getenv("MOEGRAD_ENGINE"); env != nullptr && *env != '\0') {
    if (moegrad_status s = parse_engine(env, &ctx->engine); s != MOEGRAD_STATUS_SUCCESS) return s;
  }
  const runtime::CpuFeatures& cpu = runtime::cpu_features();
  if (cpu.l1d_bytes > 0) ctx->caches.l1d = cpu.l1d_bytes;
  if (cpu.l2_bytes > 0) ctx->caches.l2 = cpu.l2_bytes;
  if (moegrad_status s = parse_cache_bytes("MOEGRAD_L1D_BYTES", runtime::kMinL1dBytes, runtime::kMaxL1dBytes,
                                           &ctx->caches.l1d);
      s != MOEGRAD_STATUS_SUCCESS)
    return s;
  if (moegrad_status s =
          parse_cache_bytes("MOEGRAD_L2_BYTES", runtime::kMinL2Bytes, runtime::kMaxL2Bytes, &ctx->caches.l2);
      s != MOEGRAD_STATUS_SUCCESS)
    return s;
  return MOEGRAD_STATUS_SUCCESS;
}

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// A variable name as people misspell it least: upper case, no underscores,
// without the MOEGRAD_ prefix.
std::string spelling_key(std::string_view name) {
  std::string key;
  for (const char c : name.substr(8))
    if (c != '_') key += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return key;
}

bool has_moegrad_prefix(std::string_view name) {
  constexpr std::string_view kPrefix = "MOEGRAD_";
  if (name.size() < kPrefix.size()) return false;
  for (size_t i = 0; i < kPrefix.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(name[i])) != kPrefix[i]) return false;
  return true;
}

// The variable an unknown MOEGRAD_* name probably misspells, or nullptr:
// the nearest by their spelling keys, within two edits (MOEGRAD_NUM_THREAD,
// MOEGRAD_NTHREADS, moegrad_num_threads) or containing the name's key
// (MOEGRAD_THREADS).
const char* misspelled_variable(std::string_view name) {
  const std::string key = spelling_key(name);
  const char* closest = nullptr;
  size_t best = std::numeric_limits<size_t>::max();
  for (const char* variable : kContextVariables) {
    const std::string target = spelling_key(variable);
    const size_t d = edit_distance(key, target);
    const bool near = d <= 2 || (key.size() >= 3 && target.find(key) != std::string::npos);
    if (near && d < best) best = d, closest = variable;
  }
  return closest;
}

}  // namespace

ContextInfo describe_context(const moegrad_context& ctx) {
  ContextInfo info;
  info.cpu = runtime::cpu_model();
  info.isa = ctx.isa.load();
  for (const moegrad_isa isa : {MOEGRAD_ISA_SCALAR, MOEGRAD_ISA_AVX2, MOEGRAD_ISA_AVX512}) {
    if (kernels::gemm_kernels_for(isa) != nullptr) info.isa_available.push_back(moegrad_isa_name(isa));
  }
  const runtime::CpuFeatures& cpu = runtime::cpu_features();
  info.avx512bf16 = cpu.avx512bf16;
  info.threads = ctx.num_threads.load();
  info.cpus = runtime::cpu_budget();
  for (const auto& [name, value] : kEngineNames) {
    if (value == ctx.engine) info.engine = name;
  }
  info.caches = ctx.caches;
  info.caches_cap = plan::CacheSizes{};  // grad_x_plan.cpp fits blocks to at most these
  info.os_l1d = cpu.l1d_bytes;
  info.os_l2 = cpu.l2_bytes;
  for (const char* name : kContextVariables) {
    const char* value = std::getenv(name);
    info.environment.emplace_back(name, value != nullptr ? std::optional<std::string>(value) : std::nullopt);
  }
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    if (!has_moegrad_prefix(name)) continue;
    bool known = false;
    for (const char* variable : kContextVariables) known = known || name == variable;
    for (const char* variable : kScriptVariables) known = known || name == variable;
    if (!known) info.ignored_environment.emplace_back(std::string(name), misspelled_variable(name));
  }
  return info;
}

namespace {

// The default context, built once with pthread_once (which a fork() in the
// middle of it does not leave stuck in the child: see
// runtime/cpu_features.cpp). Constant-initialised and never destroyed, so a
// user's static destructor may still use it.
struct DefaultContext {
  moegrad_context* instance = nullptr;
  moegrad_status status = MOEGRAD_STATUS_SUCCESS;
  char message[1024] = {};  // why it could not be built (truncated)
};
constinit DefaultContext g_default;
pthread_once_t g_default_built = PTHREAD_ONCE_INIT;

void build_default_context() {
  // A fork() may have interrupted a build in the parent: start afresh.
  g_default = DefaultContext{};
  g_default.instance = new (std::nothrow) moegrad_context;
  if (g_default.instance == nullptr) {
    g_default.status = fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate the default context");
  } else {
    g_default.status = read_context_env(g_default.instance);
    if (g_default.status != MOEGRAD_STATUS_SUCCESS) {
      delete g_default.instance;
      g_default.instance = nullptr;
    } else {
      // Threads that cannot be started now (a container at its pids limit
      // for a moment) are no reason to refuse every later call: the
      // context is kept without a pool, and each run tries to start one
      // (moegrad_context::pool) and reports why it could not.
      (void)g_default.instance->resize_pool(g_default.instance->num_threads);
    }
  }
  std::snprintf(g_default.message, sizeof g_default.message, "%s", moegrad_last_error_message());
}

}  // namespace

moegrad_status default_context(const moegrad_context** ctx) {
  // If the environment is invalid every call reports it again.
  pthread_once(&g_default_built, build_default_context);
  if (g_default.status != MOEGRAD_STATUS_SUCCESS) return fail(g_default.status, "default context: %s", g_default.message);
  *ctx = g_default.instance;
  return MOEGRAD_STATUS_SUCCESS;
}

}  // namespace moegrad

moegrad_status moegrad_context::pool(std::shared_ptr<moegrad::runtime::ThreadPool>* out) const {
  std::lock_guard<moegrad::runtime::ForkSafeMutex> lock(pool_mutex_);
  // A context copied into a child by fork() (Python's multiprocessing, a
  // DataLoader worker) starts its own workers there.
  if (!pool_ || pool_->forked()) {
    if (auto s = start_pool(num_threads)) return s;
  }
  *out = pool_;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_context::resize_pool(int32_t threads) {
  std::lock_guard<moegrad::runtime::ForkSafeMutex> lock(pool_mutex_);
  if (!pool_ || pool_->forked() || pool_->size() != threads) {
    if (auto s = start_pool(threads)) return s;
  }
  num_threads = threads;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_context::start_pool(int32_t threads) const {
  using moegrad::runtime::ThreadPool;
  try {
    // A pool inherited through fork() is left allocated: see ThreadPool::forked.
    pool_ = std::shared_ptr<ThreadPool>(new ThreadPool(threads), [](ThreadPool* p) {
      if (!p->forked()) delete p;
    });
  } catch (const std::exception& e) {  // bad_alloc, or std::system_error from std::thread
    return moegrad::fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot start a pool of %d threads: %s", threads, e.what());
  }
  return MOEGRAD_STATUS_SUCCESS;
}

using moegrad::fail;

extern "C" {

moegrad_status moegrad_context_create(moegrad_context** ctx) {
  if (ctx == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "moegrad_context_create: ctx is NULL");
  *ctx = nullptr;
  auto* c = new (std::nothrow) moegrad_context;
  if (c == nullptr) return fail(MOEGRAD_STATUS_OUT_OF_MEMORY, "cannot allocate a context");
  // The pool starts at the first run (moegrad_context::pool), not here: a
  // caller that asks for fewer threads than the default before running
  // (set_num_threads, the CLI's --threads, Python's num_threads=) must not
  // fail, where the OS limits threads, for threads it never asked for.
  if (moegrad_status s = moegrad::read_context_env(c); s != MOEGRAD_STATUS_SUCCESS) {
    delete c;
    return s;
  }
  *ctx = c;
  return MOEGRAD_STATUS_SUCCESS;
}

void moegrad_context_destroy(moegrad_context* ctx) { delete ctx; }

moegrad_status moegrad_context_set_num_threads(moegrad_context* ctx, int32_t num_threads) {
  if (ctx == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "set_num_threads: ctx is NULL");
  if (num_threads < 0 || num_threads > moegrad::kMaxThreads)
    return fail(MOEGRAD_STATUS_INVALID_ARGUMENT, "num_threads=%d is not in [0, %d] (0 = default)",
                num_threads, moegrad::kMaxThreads);
  return ctx->resize_pool(num_threads == 0 ? ctx->default_threads : num_threads);
}

moegrad_status moegrad_context_get_num_threads(const moegrad_context* ctx, int32_t* num_threads) {
  if (ctx == nullptr || num_threads == nullptr)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "get_num_threads: ctx or num_threads is NULL");
  *num_threads = ctx->num_threads;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_context_set_isa(moegrad_context* ctx, moegrad_isa isa) {
  if (ctx == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "set_isa: ctx is NULL");
  moegrad_isa resolved = MOEGRAD_ISA_SCALAR;
  if (auto s = moegrad::resolve_isa(isa, &resolved)) return s;
  ctx->isa = resolved;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_context_get_isa(const moegrad_context* ctx, moegrad_isa* isa) {
  if (ctx == nullptr || isa == nullptr)
    return fail(MOEGRAD_STATUS_NULL_POINTER, "get_isa: ctx or isa is NULL");
  *isa = ctx->isa;
  return MOEGRAD_STATUS_SUCCESS;
}

moegrad_status moegrad_context_set_fast_bf16(moegrad_context* ctx, int32_t enable) {
  if (ctx == nullptr) return fail(MOEGRAD_STATUS_NULL_POINTER, "set_fast_bf16: ctx is NULL");
  if (enable != 0 && enable != 1)
    return fail(MOEGRAD_STATUS_INVALID_ARGUMENT, "fast_bf16=%d must be 0 or 1", enable);
  ctx->fast_bf16 = enable == 1;
  return MOEGRAD_STATUS_SUCCESS;
}

}  // extern "C"

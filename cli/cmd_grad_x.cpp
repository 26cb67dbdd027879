// moegrad grad-x: the operator on .npy files (SPEC 7). Inputs are mapped, not
// copied; the output is written to a temp file and renamed only on success.
#include <moegrad/moegrad.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <moegrad/moegrad.hpp>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "aligned_buffer.h"
#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "dense_bytes.h"
#include "dl_tensor.h"
#include "flags.h"
#include "gib_text.h"
#include "npy.h"
#include "peak_rss.h"

namespace moegrad::cli {
namespace {

constexpr char kHelp[] =
    "Usage: moegrad grad-x --grad-y GY.npy --weight W.npy --row-idx IDX.npy\n"
    "                      --group-list GL.npy --batch B --top-k T\n"
    "                      [--row-idx-type 0|1] [--group-list-type count|cumsum]\n"
    "                      [--bf16 [--fast-bf16]] [--threads N] --out DX.npy\n"
    "\n"
    "Computes grad_x[b, k] = sum over expanded rows i of token b of\n"
    "sum_n grad_y[i, n] * weight[g(i), k, n] and writes it as float32 [B, K].\n"
    "\n"
    "  --grad-y GY.npy       [M, N] <f4 or <f2 (or <u2 with --bf16)\n"
    "  --weight W.npy        [G, K, N], same dtype as grad_y; Fortran order is fine\n"
    "  --row-idx IDX.npy     [L] <i8 or <i4 routing index (see --row-idx-type)\n"
    "  --group-list GL.npy   [G] <i8 or <i4 rows per expert\n"
    "  --batch B             tokens (rows of grad_x), >= 1\n"
    "  --top-k T             routing slots per token, >= 1\n"
    "  --row-idx-type 0|1    0 (default): IDX[i] = original position b*T+j of expanded\n"
    "                        row i, -1 = padding row; 1: IDX[b*T+j] = expanded row of\n"
    "                        that slot, -1 = dropped slot\n"
    "  --group-list-type     count (default): GL[g] = rows of expert g;\n"
    "                        cumsum: GL[g] = rows of experts 0..g\n"
    "  --bf16                GY and W are <u2 arrays holding raw bfloat16 bits\n"
    "  --fast-bf16           with --bf16: AVX512_BF16 pair dot-products, outside the\n"
    "                        SPEC 5 order but reproducible (README, 'Fast bf16 mode');\n"
    "                        runs on the avx512 path of a CPU with AVX512_BF16, or emulated\n"
    "                        with MOEGRAD_ISA=scalar; refused elsewhere (MOEGRAD_ISA=avx2)\n"
    "  --threads N           worker threads (default: MOEGRAD_NUM_THREADS or the CPUs\n"
    "                        this process may use)\n"
    "  --out DX.npy          output, <f4 C-order [B, K]; written via a temp file in the\n"
    "                        same directory and renamed, so it appears only on success\n"
    "                        (a symlink stays and its file is replaced; a replaced file\n"
    "                        keeps its group where you belong to it, and its permission\n"
    "                        bits, limited where its owner or group is not kept; a\n"
    "                        read-only file is refused). Written\n"
    "                        in place instead: a device or FIFO; a file this\n"
    "                        command holds open for writing (/dev/stdout, /dev/fd/N),\n"
    "                        through that descriptor, as a shell's > or >> opened it;\n"
    "                        and, truncated only once the result is complete, a file\n"
    "                        a rename may not replace: a mount point, a file in a\n"
    "                        directory you may not write to, another user's in /tmp\n"
    "\n"
    "The result is bitwise identical for any --threads and any ISA (MOEGRAD_ISA),\n"
    "NaNs included (each is stored as 0x7fc00000); with --fast-bf16, for any --threads.\n"
    "Exit status: 0 success, 1 bad input data or library error, 2 usage error;\n"
    "on error one 'moegrad: error:' line on stderr, no new output file, and an\n"
    "existing DX.npy left as it was; only a write that fails while it rewrites\n"
    "a file in place (above) can leave part of the result there.\n";

constexpr FlagSpec kFlags[] = {
    {"--grad-y", true}, {"--weight", true},  {"--row-idx", true},      {"--group-list", true},
    {"--batch", true},  {"--top-k", true},   {"--row-idx-type", true}, {"--group-list-type", true},
    {"--bf16", false},  {"--threads", true}, {"--out", true},           {"--fast-bf16", false},
};

// What each kind of input takes, in the refusals of the loader and of the
// checks below alike.
constexpr const char* kFloatExpected = "<f4 or <f2 (or <u2 with --bf16)";
constexpr const char* kBf16Expected = "<u2 (raw bfloat16 bits, as --bf16 says)";
constexpr const char* kIndexExpected = "<i8 or <i4";

NpyArray load_input(const char* flag, const std::string& path, const char* expected) {
  try {
    return NpyArray::load(path, expected);
  } catch (const CliError& e) {
    data_error(std::string(flag) + ": " + e.what());
  }
}

// grad_y and weight: f32 or f16 as stored, or bf16 bits in <u2 when --bf16
// says so. Refusing the other combinations catches a forgotten or stray --bf16
// instead of reading bits as the wrong type.
void check_float_input(const char* flag, const std::string& path, NpyArray& a, bool bf16) {
  const NpyDtype t = a.dtype();
  const std::string where = std::string(flag) + ": " + path + " holds " + npy_descr(t);
  if (bf16) {
    if (t != NpyDtype::kU16) data_error(where + "; expected " + kBf16Expected);
    a.set_dl_dtype({kDLBfloat, 16, 1});
    return;
  }
  if (t == NpyDtype::kU16) {
    data_error(where + " (uint16); if it holds raw bfloat16 bits, pass --bf16");
  }
  if (t != NpyDtype::kF32 && t != NpyDtype::kF16) {
    data_error(where + "; expected " + kFloatExpected);
  }
}

void check_index_input(const char* flag, const std::string& path, const NpyArray& a) {
  if (a.dtype() != NpyDtype::kI64 && a.dtype() != NpyDtype::kI32) {
    data_error(std::string(flag) + ": " + path + " holds " + npy_descr(a.dtype()) + "; expected " +
               kIndexExpected);
  }
}

// A library message names tensors (grad_y, expanded_row_idx); the user
// typed flags and files. Appends "; grad_y is --grad-y FILE" for each input
// the message names, as a whole word.
struct Input {
  const char* tensor;
  const char* flag;
  const std::string& path;
};

std::string with_inputs_named(const std::string& message, std::initializer_list<Input> inputs) {
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out = message;
  for (const Input& in : inputs) {
    const std::string_view name(in.tensor);
    for (size_t at = message.find(name); at != std::string::npos; at = message.find(name, at + 1)) {
      const size_t end = at + name.size();
      if ((at == 0 || !word_char(message[at - 1])) && (end == message.size() || !word_char(message[end]))) {
        out += "; " + std::string(name) + " is " + in.flag + " " + in.path;
        break;
      }
    }
  }
  return out;
}

// An --out that is one of the inputs (the same file, by any path or link)
// would be replaced by grad_x: refused before anything is written, as the
// library refuses an output that overlaps an input in memory.
void refuse_output_over_input(const std::string& out_path, std::initializer_list<Input> inputs) {
  struct stat out_st {};
  if (stat(out_path.c_str(), &out_st) != 0) return;  // nothing there yet: nothing to replace
  for (const Input& in : inputs) {
    struct stat in_st {};
    if (stat(in.path.c_str(), &in_st) == 0 && in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino)
      usage_error("grad-x: --out " + out_path + " is the " + in.flag + " input" +
                  (in.path == out_path ? "" : " (" + in.path + ")") + "; write grad_x to another file");
  }
}

// grad_x and the workspace, before either is backed: where they exceed the
// memory available (MemAvailable or a cgroup's headroom), backing them may
// still succeed (Linux overcommits up to about the machine's RAM) and
// filling them gets the process killed with no message, its temporary
// output left behind. The inputs are mapped files, whose pages the kernel
// can drop and read again.
void refuse_beyond_available_memory(const std::string& grad_x_what, uint64_t grad_x_bytes, uint64_t workspace_bytes) {
  uint64_t need = 0;
  if (__builtin_add_overflow(grad_x_bytes, workspace_bytes, &need)) need = UINT64_MAX;
  const std::optional<bench::AvailableMemory> available = bench::memory_short_of(need);
  if (!available) return;
  const auto [need_text, available_text] = gib_texts(need, available->bytes);
  data_error("grad-x: " + grad_x_what + " and the workspace need " + need_text + ", more than the " +
             available_text + " available (" + available->source() + ")");
}

}  // namespace

int cmd_grad_x(std::span<char* const> args) {
  const ParsedFlags flags = ParsedFlags::parse("grad-x", kFlags, args);
  if (flags.help()) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  const std::string gy_path = flags.required_text("--grad-y");
  const std::string w_path = flags.required_text("--weight");
  const std::string idx_path = flags.required_text("--row-idx");
  const std::string gl_path = flags.required_text("--group-list");
  const int64_t batch = flags.required_integer("--batch", 1, INT32_MAX);  // a dimension of grad_x (SPEC 4)
  const int64_t top_k = flags.required_integer("--top-k", 1, INT64_MAX);
  const std::string out_path = flags.required_text("--out");
  const int64_t row_idx_type = flags.integer("--row-idx-type", 0, 1).value_or(0);
  const bool cumsum = flags.choice("--group-list-type", {"count", "cumsum"}, "count") == "cumsum";
  const bool bf16 = flags.has("--bf16");
  const bool fast_bf16 = flags.has("--fast-bf16");
  if (fast_bf16 && !bf16) usage_error("grad-x: --fast-bf16 applies to bf16 inputs only: pass --bf16 too");
  const std::optional<int64_t> threads = flags.integer("--threads", 1, MOEGRAD_MAX_THREADS);

  refuse_output_over_input(out_path, {{"grad_y", "--grad-y", gy_path},
                                      {"weight", "--weight", w_path},
                                      {"expanded_row_idx", "--row-idx", idx_path},
                                      {"group_list", "--group-list", gl_path}});
  AtomicFile out(out_path);  // before the work: an unwritable --out fails fast

  const char* float_expected = bf16 ? kBf16Expected : kFloatExpected;
  NpyArray grad_y = load_input("--grad-y", gy_path, float_expected);
  NpyArray weight = load_input("--weight", w_path, float_expected);
  const NpyArray row_idx = load_input("--row-idx", idx_path, kIndexExpected);
  const NpyArray group_list = load_input("--group-list", gl_path, kIndexExpected);
  check_float_input("--grad-y", gy_path, grad_y, bf16);
  check_float_input("--weight", w_path, weight, bf16);
  check_index_input("--row-idx", idx_path, row_idx);
  check_index_input("--group-list", gl_path, group_list);
  // K sizes the output, so the weight's rank is checked here; every other
  // shape and content rule is the library's, reported in its words. These
  // two name the status the library would have given, as its messages do.
  if (weight.shape().size() != 3) {
    data_error("--weight: " + w_path + " has shape " + weight.shape_string() +
               "; expected 3 dimensions [G, K, N] (MOEGRAD_STATUS_BAD_RANK)");
  }
  const int64_t k = weight.shape()[1];
  uint64_t out_bytes = 0;
  if (!dense_bytes({batch, k}, sizeof(float), &out_bytes)) {
    data_error("grad_x [" + std::to_string(batch) + ", " + std::to_string(k) +
               "] overflows 64-bit size (MOEGRAD_STATUS_SIZE_OVERFLOW)");
  }
  // Named with its shape and where that comes from, so that a mistyped
  // --batch is recognisable when the buffer cannot be had. Only reserved
  // until the library has checked the arguments: a shape it refuses (an N
  // that does not match, a K over its limit) is reported as such, not as
  // grad_x too large for memory.
  const std::string grad_x_what = "grad_x [" + std::to_string(batch) + ", " + std::to_string(k) +
                                  "] (--batch by the weight's K)";
  AlignedBuffer grad_x_buf = AlignedBuffer::reserve(out_bytes, grad_x_what.c_str());
  int64_t grad_x_shape[2] = {batch, k};
  const DLTensor grad_x = make_dl_tensor(grad_x_buf.data(), {kDLFloat, 32, 1}, grad_x_shape, 2);

  const moegrad_grad_x_args op_args{
      &grad_y.tensor(),
      &weight.tensor(),
      &row_idx.tensor(),
      &group_list.tensor(),
      &grad_x,
      batch,
      top_k,
      static_cast<int32_t>(row_idx_type),
      cumsum ? MOEGRAD_GROUP_LIST_CUMSUM : MOEGRAD_GROUP_LIST_COUNT,
  };
  try {
    // Scoped: its threads end before the output is written, so that the
    // termination signals AtomicFile holds while it rewrites a file in
    // place reach no other thread.
    moegrad::Context ctx;
    if (threads) ctx.set_num_threads(static_cast<int32_t>(*threads));
    if (fast_bf16) ctx.set_fast_bf16(true);
    moegrad::GradXExecutor executor(op_args, ctx);
    refuse_beyond_available_memory(grad_x_what, out_bytes, executor.workspace_bytes());
    grad_x_buf.back(grad_x_what.c_str());
    AlignedBuffer workspace(executor.workspace_bytes(), "the workspace");
    executor.run(workspace.data(), workspace.size(), ctx);
  } catch (const moegrad::Error& e) {
    throw moegrad::Error(e.status(), with_inputs_named(e.what(), {{"grad_y", "--grad-y", gy_path},
                                                                  {"weight", "--weight", w_path},
                                                                  {"expanded_row_idx", "--row-idx", idx_path},
                                                                  {"group_list", "--group-list", gl_path}}));
  }

  write_npy_f32(out, grad_x_buf.as<float>(), grad_x_shape);
  out.commit();
  return kExitOk;
}

}  // namespace moegrad::cli

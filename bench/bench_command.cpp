#include "bench_command.h"

#include <moegrad/moegrad.h>
#include <moegrad/moegrad.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atomic_file.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "cli_error.h"
#include "fma_peak.h"
#include "layer_op_runner.h"
#include "onednn_nonfused.h"
#include "runtime/cpu_model.h"
#include "runtime/usable_cpus.h"

namespace moegrad::bench {
namespace {

// 1 and the CPUs this process may use, deduplicated.
std::vector<int> default_threads(int64_t cpus) {
  std::vector<int> t{1};
  if (cpus > 1) t.push_back(static_cast<int>(std::min<int64_t>(cpus, MOEGRAD_MAX_THREADS)));
  return t;
}

// More workers than CPUs time-slice: their times say nothing about that
// many cores, and the speed-up line compares unlike things.
std::optional<std::string> oversubscription_note(const std::vector<int>& threads, int64_t cpus) {
  const int most = *std::max_element(threads.begin(), threads.end());
  if (most <= cpus) return std::nullopt;
  return std::to_string(most) + " threads share the " + std::to_string(cpus) + " CPU" + (cpus == 1 ? "" : "s") +
         " this process may use: their times are not those of " + std::to_string(most) + " cores";
}

// oneDNN's verbose mode, which the module turns off (onednn_module.cpp).
std::optional<std::string> onednn_verbose_note() {
  if (OnednnNonfused::version().empty()) return std::nullopt;  // no module: nothing to turn off
  for (const char* name : {"ONEDNN_VERBOSE", "DNNL_VERBOSE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0' && std::string_view(value) != "0")
      return std::string(name) + " is ignored: oneDNN would print to stdout, into the tables or the JSON, from "
                                 "inside the timed calls; the notes name the implementation it picked";
  }
  return std::nullopt;
}

// A loop's fma-peak row: its thread count and the median of its runs.
Row fma_peak_row(const FmaLoop& loop) {
  Row r;
  r.threads = loop.threads();
  r.path = "fma-peak";
  r.gflops = loop.peak_gflops();
  return r;
}

int run(std::span<char* const> args, std::optional<Progress>& progress) {
  Options options = parse_options(args);
  if (options.help) {
    std::fputs(kBenchHelp, stdout);
    std::fflush(stdout);
    return cli::kExitOk;
  }
  // Created now, so a path that cannot be written fails before minutes of
  // timing, not after them.
  std::optional<cli::AtomicFile> json_file;
  if (options.json_file) json_file.emplace(*options.json_file);
  const int64_t cpus = runtime::usable_cpus();
  if (options.threads.empty()) options.threads = default_threads(cpus);
  const std::optional<std::string> threads_note = oversubscription_note(options.threads, cpus);
  const std::optional<std::string> verbose_note = onednn_verbose_note();

  MachineInfo machine;
  machine.cpu = runtime::cpu_model();
  const moegrad_isa context_isa = moegrad::Context().isa();
  machine.isa = moegrad_isa_name(context_isa);
  machine.onednn = OnednnNonfused::version();
  if (machine.onednn.empty()) machine.onednn = "no oneDNN: " + OnednnNonfused::unavailable_reason();

  RunConfig config{options.dtypes, options.threads, options.reps, false, options.max_memory_bytes};
  const bool grad_x = options.op == BenchOp::kGradX;
  std::optional<std::string> fast_note;
  if (std::find(options.dtypes.begin(), options.dtypes.end(), cli::FloatFormat::kBF16) != options.dtypes.end()) {
    fast_note = fast_bf16_unavailable_reason();
    config.fast_bf16 = !fast_note;
  }
  const int steps = grad_x ? shape_steps(config) : layer_op_shape_steps(config);
  const int total = static_cast<int>(options.threads.size() + options.shapes.size() * static_cast<size_t>(steps));
  progress.emplace(total);

  // The FMA loop of each thread count: sized and run now, then in every
  // shape's rounds; its peak is known once the last shape is done, so the
  // tables are printed then.
  auto run_at_start = [&](int threads, moegrad_isa isa) {
    auto loop = std::make_unique<FmaLoop>(threads, isa);
    for (int i = 0; i < options.reps.value_or(kMinDefaultReps); ++i) loop->run();
    return loop;
  };
  std::vector<std::unique_ptr<FmaLoop>> loops;
  std::vector<FmaLoop*> loop_ptrs;
  for (const int threads : options.threads) {
    progress->step("fma-peak t=" + std::to_string(threads));
    loops.push_back(run_at_start(threads, MOEGRAD_ISA_AUTO));
    loop_ptrs.push_back(loops.back().get());
  }
  // A path forced below the CPU's best (MOEGRAD_ISA=avx2 on an AVX-512 CPU)
  // is bounded by its own ISA's loop, not the best one's: on a Zen 5 a ymm
  // FMA loop runs at half the zmm one's rate. That loop is run at the start
  // only; %peak and the JSON's fma-peak stay the best loop's (the machine's
  // peak, as issue 3 defines it). The scalar path has no loop.
  machine.fma_isa = loops.front()->isa();  // the same for every thread count
  if (machine.isa != machine.fma_isa && context_isa != MOEGRAD_ISA_SCALAR) {
    for (const int threads : options.threads) {
      progress->status(std::string("fma-peak ") + machine.isa + " t=" + std::to_string(threads));
      machine.own_fma_peak.push_back(fma_peak_row(*run_at_start(threads, context_isa)));
    }
  }

  std::vector<ShapeReport> reports;
  for (const ShapeSpec& shape : options.shapes) {
    reports.push_back(grad_x ? run_shape(shape, config, loop_ptrs, *progress)
                             : run_layer_op_shape(shape, options.op, config, loop_ptrs, *progress));
    if (fast_note) reports.back().notes.push_back(*fast_note);
    if (threads_note) reports.back().notes.push_back(*threads_note);
    if (verbose_note) reports.back().notes.push_back(*verbose_note);
  }
  for (const std::unique_ptr<FmaLoop>& loop : loops) machine.fma_peak.push_back(fma_peak_row(*loop));
  progress->clear();

  std::vector<Row> rows = machine.fma_peak;
  for (const ShapeReport& report : reports) rows.insert(rows.end(), report.rows.begin(), report.rows.end());
  if (options.json) {
    std::vector<std::string> notes;  // each once, on stderr (the tables print their own)
    if (const std::optional<std::string> own = own_fma_loop_note(machine)) notes.push_back(*own);
    for (const ShapeReport& report : reports) {
      for (const std::string& n : report.notes) {
        if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
      }
    }
    for (const std::string& n : notes) std::fprintf(stderr, "moegrad: note: %s\n", n.c_str());
    print_json(stdout, rows);
  } else {
    print_header(stdout, machine, options.op);
    for (const ShapeReport& report : reports) print_table(stdout, report, machine);
  }
  if (json_file) {
    const std::string text = json_text(rows);
    json_file->write(text.data(), text.size());
    json_file->commit();
  }
  // Last, so that every result is out first; the JSON, which has no check
  // field, has null times for these rows (print_json).
  const std::vector<std::string> failed = failed_checks(reports);
  if (failed.empty()) return cli::kExitOk;
  std::string list;
  for (const std::string& f : failed) list += (list.empty() ? "" : ", ") + f;
  std::fprintf(stderr, "moegrad: error: bench: %zu cross-check%s failed: %s\n", failed.size(),
               failed.size() == 1 ? "" : "s", list.c_str());
  return cli::kExitFailure;
}

int report_error(std::optional<Progress>& progress, const std::string& message, int status) {
  if (progress) progress->clear();
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');  // one line, whatever the source
  std::fflush(stdout);
  std::fprintf(stderr, "moegrad: error: %s\n", line.c_str());
  return status;
}

}  // namespace

int run_bench_command(int argc, char** argv) {
  std::optional<Progress> progress;
  try {
    return run(std::span<char* const>(argv, argc > 0 ? static_cast<size_t>(argc) : 0), progress);
  } catch (const UsageError& e) {
    return report_error(progress, e.what(), cli::kExitUsage);
  } catch (const cli::CliError& e) {
    return report_error(progress, std::string("bench: ") + e.what(), e.exit_code());
  } catch (const moegrad::Error& e) {
    return report_error(progress, std::string("bench: ") + e.what(), cli::kExitFailure);
  } catch (const std::exception& e) {
    return report_error(progress, std::string("bench: ") + e.what(), cli::kExitFailure);
  }
}

}  // namespace moegrad::bench

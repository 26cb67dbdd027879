// `moegrad bench` end to end on a tiny shape: the --json output (and the
// --json-file one) is one JSON array whose objects carry exactly the issue-3
// keys and the expected paths;
// bad arguments exit 2 with one "moegrad: error:" line. Timings are never
// asserted.
#include <gtest/gtest.h>
#include <moegrad/moegrad.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_command.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "interleaved_timing.h"
#include "cpu_affinity.h"
#include "run_bench_captured.h"
#include "runner.h"
#include "runtime/cgroup_cpu_limit.h"
#include "runtime/usable_cpus.h"
#include "scratch_dir.h"
#include "stats.h"

namespace {

using namespace moegrad::bench::test;

// The thread count bench times beside 1 without --threads: the CPUs the
// process may use (its affinity, narrowed by a cgroup CPU quota), so 1 where
// there is only one.
int64_t default_second_thread_count() {
  return std::min<int64_t>(moegrad::runtime::usable_cpus(), MOEGRAD_MAX_THREADS);
}

// Whether this build has the oneDNN module (bench/CMakeLists.txt).
#if MOEGRAD_BENCH_HAVE_DNNL
constexpr bool kBuiltWithOnednn = true;
#else
constexpr bool kBuiltWithOnednn = false;
#endif

TEST(BenchCommand, JsonRowsHaveTheIssueSchema) {
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1", "--reps", "1", "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  const std::vector<const JsonObject*> rows = parse_rows(c.out);
  std::multiset<std::string> paths;
  std::map<std::string, double> workspace;  // by path
  for (const JsonObject* r : rows) {
    const std::string path = r->at("path").string();
    paths.insert(path);
    if (r->at("workspace_bytes").is_number()) workspace[path] = r->at("workspace_bytes").number();
    EXPECT_EQ(r->at("threads").number(), 1);
    if (path == "fma-peak") {
      for (const std::string& k : kKeys) {
        if (k != "threads" && k != "gflops" && k != "path") {
          EXPECT_TRUE(r->at(k).is_null()) << k;
        }
      }
      EXPECT_TRUE(r->at("gflops").is_number() || r->at("gflops").is_null());
      continue;
    }
    EXPECT_EQ(r->at("shape").string(), "64,2,4,64,32");
    EXPECT_EQ(r->at("batch").number(), 64);
    EXPECT_EQ(r->at("top_k").number(), 2);
    EXPECT_EQ(r->at("experts").number(), 4);
    EXPECT_EQ(r->at("k").number(), 64);
    EXPECT_EQ(r->at("n").number(), 32);
    EXPECT_EQ(r->at("dtype").string(), "f32");
    EXPECT_EQ(r->at("mode").string(), "exact");
    // Built with oneDNN, the module beside the executables must load and
    // run f32 (it has a matmul for it on every x86-64 CPU).
    if (path == "onednn-nonfused" && !kBuiltWithOnednn && r->at("ms").is_null()) continue;
    for (const char* k : {"ms", "ms_min", "ms_max", "gflops", "workspace_bytes"}) {
      ASSERT_TRUE(r->at(k).is_number()) << path << " " << k;
    }
    EXPECT_LE(r->at("ms_min").number(), r->at("ms").number());
    EXPECT_LE(r->at("ms").number(), r->at("ms_max").number());
    EXPECT_TRUE(r->at("peak_rss_bytes").is_number() || r->at("peak_rss_bytes").is_null());
    if (path == "nonfused") {
      EXPECT_GE(r->at("workspace_bytes").number(), 4.0 * 128 * 64);  // 4*M*K
    }
  }
  EXPECT_EQ(paths, (std::multiset<std::string>{"fma-peak", "fused", "nonfused", "onednn-nonfused"}));
  // One thread: the non-fused path's own workspace is the fused plan's (the
  // same tables, one worker's regions) beside its 4*M*K intermediate.
  EXPECT_EQ(workspace["nonfused"] - 4.0 * 128 * 64, workspace["fused"]);
  EXPECT_EQ(c.err.find("warning"), std::string::npos) << c.err;  // every cross-check passed
}

// The rows of the human tables: dtype, mode, threads, path and median (ms).
struct TableRow {
  std::string dtype, mode, path;
  long threads = 0;
  double ms = 0;
};

std::vector<TableRow> table_rows(const std::string& out) {
  std::vector<TableRow> rows;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    std::istringstream in(l);
    TableRow r;
    if (in >> r.dtype >> r.mode >> r.threads >> r.path >> r.ms) rows.push_back(r);
  }
  return rows;
}

// --op: the layer operators' rows carry "op" besides the issue's keys, one
// moegrad and one onednn row per dtype and thread count. Built with oneDNN,
// its f32 matmuls run and agree with moegrad's output (no warning). The
// shape leaves experts empty (M 4, G 8): the weight grad's oneDNN path must
// zero their grad_weight, or its NaN fill fails the check.
TEST(BenchCommand, LayerOperatorRowsNameTheirOperator) {
  for (const char* op : {"forward", "weight-grad"}) {
    for (const char* shape : {"64,2,4,64,32", "4,1,8,16,24"}) {
      const Captured c =
          run_bench({"--op", op, "--shape", shape, "--dtype", "f32", "--threads", "1", "--reps", "1", "--json"});
      ASSERT_EQ(c.status, 0) << op << " " << shape << "\n" << c.err;
      EXPECT_EQ(c.err.find("warning"), std::string::npos) << op << " " << shape << "\n" << c.err;
      std::multiset<std::string> paths;
      for (const JsonObject* r : parse_rows(c.out, /*layer_op=*/true)) {
        const std::string path = r->at("path").string();
        paths.insert(path);
        if (path == "fma-peak") continue;
        EXPECT_EQ(r->at("op").string(), op);
        EXPECT_EQ(r->at("shape").string(), shape);
        EXPECT_EQ(r->at("dtype").string(), "f32");
        EXPECT_EQ(r->at("mode").string(), "exact");
        EXPECT_TRUE(r->at("peak_rss_bytes").is_null()) << path;
        if (path == "onednn" && !kBuiltWithOnednn && r->at("ms").is_null()) continue;
        for (const char* k : {"ms", "ms_min", "ms_max", "gflops", "workspace_bytes"}) {
          ASSERT_TRUE(r->at(k).is_number()) << op << " " << path << " " << k;
        }
        EXPECT_LE(r->at("ms_min").number(), r->at("ms").number());
        EXPECT_LE(r->at("ms").number(), r->at("ms_max").number());
      }
      EXPECT_EQ(paths, (std::multiset<std::string>{"fma-peak", "moegrad", "onednn"})) << op;
    }
  }
}

// The table of a --op run: its own title, rows named moegrad and onednn,
// moegrad's time against oneDNN's, and no 4*M*K (no such tensor is avoided).
TEST(BenchCommand, LayerOperatorTable) {
  const Captured c = run_bench({"--op", "weight-grad", "--shape", "64,2,4,64,32", "--dtype", "f32,f16", "--threads",
                                "1", "--reps", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("moegrad bench --op weight-grad: moegrad_grouped_matmul_weight_grad vs one oneDNN matmul "
                       "per expert\n"),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("(M 128, 0.0 GFLOP; 1 rep)\n"), std::string::npos) << c.out;
  std::set<std::string> timed;  // the rows with a median
  for (const TableRow& r : table_rows(c.out)) timed.insert(r.dtype + " " + r.path);
  // oneDNN 2.6 has no f16 matmul on the CPUs this runs on: a null row, and
  // a note why (a oneDNN or CPU that has one times it instead).
  const bool f16_null = c.out.find("  note: onednn f16: null: ") != std::string::npos;
  std::set<std::string> expected = {"f32 moegrad", "f16 moegrad"};
  if (kBuiltWithOnednn) expected.insert("f32 onednn");
  if (kBuiltWithOnednn && !f16_null) expected.insert("f16 onednn");
  EXPECT_EQ(timed, expected) << c.out;
  if (!kBuiltWithOnednn) {
    EXPECT_TRUE(f16_null) << c.out;
  }
  EXPECT_NE(c.out.find("  note: each dtype was timed in its own rounds"), std::string::npos) << c.out;
  if (kBuiltWithOnednn) {
    std::istringstream lines(c.out);
    bool ratio = false;
    for (std::string l; std::getline(lines, l);) ratio |= l.rfind("f32 ", 0) == 0 && l.find(" moegrad ") != l.npos &&
                                                             l.find("x ") != l.npos;
    EXPECT_TRUE(ratio) << c.out;  // the /oneDNN column of f32's moegrad row
  }
}

// The reference path of each op (grad-x's fused one, the layer operators'
// moegrad one) is checked against float64 sums at the first thread count:
// "ref, f64 R", R the largest error as a fraction of the bound; the later
// thread counts are compared with it bit for bit.
TEST(BenchCommand, TheReferencePathIsCheckedAgainstFloat64) {
  for (const auto& [op, path] : {std::pair<std::string, std::string>{"grad-x", "fused"}, {"forward", "moegrad"},
                                 {"weight-grad", "moegrad"}}) {
    const Captured c = run_bench({"--op", op, "--shape", "64,2,4,64,32", "--dtype", "f32,bf16", "--threads", "1",
                                  "--reps", "1"});
    ASSERT_EQ(c.status, 0) << op << "\n" << c.err;
    int checked = 0;
    std::istringstream lines(c.out);
    for (std::string l; std::getline(lines, l);) {
      std::istringstream in(l);
      TableRow r;
      if (!(in >> r.dtype >> r.mode >> r.threads >> r.path) || r.mode != "exact" || r.path != path) continue;
      const size_t at = l.find("ref, f64 ");
      ASSERT_NE(at, std::string::npos) << op << ": " << l;
      const double ratio = std::stod(l.substr(at + 9));
      EXPECT_GE(ratio, 0.0) << op << ": " << l;
      EXPECT_LE(ratio, 1.0) << op << ": " << l;
      ++checked;
    }
    EXPECT_EQ(checked, 2) << op << "\n" << c.out;  // f32 and bf16
  }
}

// --json-file writes the run's JSON array beside the tables on stdout: each
// row's median there is the one in the table (printed to 3 decimals), so both
// come from one run; with --json as well, the file holds stdout's bytes.
TEST(BenchCommand, JsonFileHoldsTheSameRunAsTheTable) {
  const moegrad::test::ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1", "--reps", "1",
                                "--json-file", (dir.path() / "run.json").string()});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("64,2,4,64,32: batch 64"), std::string::npos) << c.out;
  ASSERT_EQ(dir.listing(), std::set<std::string>{"run.json"});  // and no temp file
  const std::string text = dir.read("run.json");
  const std::vector<const JsonObject*> rows = parse_rows(text);
  std::map<std::string, double> table_ms;  // path -> median, from the table's f32 rows
  for (const TableRow& r : table_rows(c.out)) {
    if (r.dtype == "f32") table_ms[r.path] = r.ms;
  }
  std::set<std::string> seen;
  for (const JsonObject* r : rows) {
    const std::string path = r->at("path").string();
    if (path == "fma-peak" || r->at("ms").is_null()) continue;
    ASSERT_TRUE(table_ms.count(path)) << path << "\n" << c.out;
    EXPECT_NEAR(r->at("ms").number(), table_ms.at(path), 0.0005 + 1e-9) << path;
    seen.insert(path);
  }
  EXPECT_TRUE(seen.count("fused") && seen.count("nonfused")) << text;

  const Captured j = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1", "--reps", "1", "--json",
                                "--json-file=" + (dir.path() / "both.json").string()});
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(dir.read("both.json"), j.out);
}

// A --json-file that cannot be written fails at once (exit 1, one error line,
// nothing on stdout), before any timing, and leaves no file behind.
TEST(BenchCommand, UnwritableJsonFileFailsFirst) {
  const moegrad::test::ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  for (const std::string& file : {(dir.path() / "missing" / "run.json").string(), dir.path().string()}) {
    const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--json-file", file});
    EXPECT_EQ(c.status, 1) << file;
    EXPECT_TRUE(c.out.empty()) << c.out;
    EXPECT_EQ(c.err.rfind("moegrad: error: bench: " + file + ": ", 0), 0u) << c.err;
    EXPECT_EQ(c.err.find('\n'), c.err.size() - 1) << c.err;
    EXPECT_EQ(c.err.find("fma-peak"), std::string::npos) << c.err;  // no progress: nothing ran
    EXPECT_TRUE(dir.listing().empty()) << file;
  }
}

TEST(BenchCommand, Bf16HasExactAndMaybeFastRows) {
  const Captured c = run_bench({"--shape=64,2,4,64,32", "--dtype=bf16,f16", "--threads=1", "--reps=1", "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::set<std::string> seen;
  for (const JsonObject* r : parse_rows(c.out)) {
    if (r->at("path").string() == "fma-peak") continue;
    seen.insert(r->at("dtype").string() + " " + r->at("mode").string() + " " + r->at("path").string());
  }
  for (const char* want : {"bf16 exact fused", "bf16 exact nonfused", "bf16 exact onednn-nonfused",
                           "f16 exact fused", "f16 exact nonfused", "f16 exact onednn-nonfused"}) {
    EXPECT_TRUE(seen.count(want)) << want;
  }
  for (const std::string& s : seen) {
    EXPECT_TRUE(s.find("fast-bf16") == std::string::npos || s == "bf16 fast-bf16 fused") << s;
  }
  EXPECT_EQ(c.err.find("warning"), std::string::npos) << c.err;
}

// The fast bf16 mode's grad_x is checked across thread counts too, bitwise
// (README "Fast bf16 mode"). The library being deterministic, no run here
// can show the check catching a difference; what this shows is that it
// does not flag one that is not there (a hash of another thread count's
// buffer, or of one the next path overwrote, would): with 1 and 2 threads
// both of the mode's rows have times (a failed check nulls them) and the
// run warns of nothing. A shape whose N is odd ends each pair chain with
// its padding term.
TEST(BenchCommand, FastBf16AcrossThreadCountsIsNotFlagged) {
  for (const char* shape : {"64,2,4,64,32", "300,3,5,40,17"}) {
    const Captured c = run_bench({"--shape", shape, "--dtype", "bf16", "--threads", "1,2", "--reps", "1"});
    ASSERT_EQ(c.status, 0) << shape << "\n" << c.err;
    EXPECT_EQ(c.err.find("warning"), std::string::npos) << shape << "\n" << c.err;
    if (c.out.find("  note: fast-bf16 skipped: ") != std::string::npos) GTEST_SKIP() << "no fast bf16 mode here";
    std::set<long> threads;
    for (const TableRow& r : table_rows(c.out)) {
      if (r.mode != "fast-bf16") continue;
      EXPECT_GT(r.ms, 0) << shape;
      threads.insert(r.threads);
    }
    EXPECT_EQ(threads, (std::set<long>{1, 2})) << c.out;
    EXPECT_EQ(c.out.find("DIFFERS"), std::string::npos) << c.out;
  }
}

// --op in bf16: moegrad's exact row and oneDNN's, and moegrad's fast bf16
// row where the CPU runs that mode (checked against the exact output, and
// across the thread counts), else a note that says why not. The run's
// checks pass: no warning.
TEST(BenchCommand, LayerOperatorBf16HasAFastRowWhereTheCpuRunsIt) {
  for (const char* op : {"forward", "weight-grad"}) {
    const Captured c = run_bench({"--op", op, "--shape", "64,2,4,64,32", "--dtype", "bf16", "--reps", "1"});
    ASSERT_EQ(c.status, 0) << op << "\n" << c.err;
    EXPECT_EQ(c.err.find("warning"), std::string::npos) << op << "\n" << c.err;
    const bool skipped = c.out.find("  note: fast-bf16 skipped: ") != std::string::npos;
    std::multiset<std::string> rows;
    for (const TableRow& r : table_rows(c.out)) {
      rows.insert(r.dtype + " " + r.mode + " " + r.path);
      if (r.mode == "fast-bf16") {
        EXPECT_GT(r.ms, 0) << op;
      }
    }
    const size_t counts = rows.count("bf16 exact moegrad");
    EXPECT_GE(counts, 1u) << c.out;
    EXPECT_EQ(rows.count("bf16 fast-bf16 moegrad"), skipped ? 0u : counts) << c.out;
    for (const std::string& r : rows)
      EXPECT_TRUE(r == "bf16 exact moegrad" || r == "bf16 exact onednn" || r == "bf16 fast-bf16 moegrad") << r;
  }
}

// Without --threads both thread counts (1 and the usable CPUs) are timed
// together, interleaved: every path must still come back once per thread
// count, with its own timing, and the fused grad_x must match across the
// counts (a mismatch or a failed cross-check prints a warning).
TEST(BenchCommand, EveryThreadCountGetsItsOwnRows) {
  const auto allowed = static_cast<int>(default_second_thread_count());
  std::set<int> want_threads{1};
  if (allowed > 1) want_threads.insert(allowed);
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32,bf16", "--reps", "2", "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::multiset<std::string> seen;
  std::set<int> threads;
  for (const JsonObject* r : parse_rows(c.out)) {
    const int t = static_cast<int>(r->at("threads").number());
    threads.insert(t);
    const std::string path = r->at("path").string();
    if (path == "fma-peak") continue;
    seen.insert(std::to_string(t) + " " + r->at("dtype").string() + " " + r->at("mode").string() + " " + path);
    if (path == "onednn-nonfused" && r->at("ms").is_null()) {
      EXPECT_FALSE(kBuiltWithOnednn && r->at("dtype").string() == "f32") << t << " " << c.out;
      continue;
    }
    ASSERT_TRUE(r->at("ms").is_number()) << t << " " << path;
    EXPECT_LE(r->at("ms_min").number(), r->at("ms").number());
    EXPECT_LE(r->at("ms").number(), r->at("ms_max").number());
  }
  EXPECT_EQ(threads, want_threads);
  for (const int t : want_threads) {
    for (const char* p : {"f32 exact fused", "f32 exact nonfused", "f32 exact onednn-nonfused", "bf16 exact fused",
                          "bf16 exact nonfused", "bf16 exact onednn-nonfused"}) {
      EXPECT_EQ(seen.count(std::to_string(t) + " " + p), 1u) << t << " " << p;
    }
  }
  EXPECT_EQ(c.err.find("warning"), std::string::npos) << c.err;
}

// --threads takes a list (a machine of many CPUs times 1, 2 and all of them
// in one run): each count once, ascending, whatever the order given.
TEST(BenchCommand, ThreadsTakesAList) {
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--threads", "2,1,2",
                                "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::vector<int> peaks;
  std::map<int, int> fused;
  for (const JsonObject* r : parse_rows(c.out)) {
    const int t = static_cast<int>(r->at("threads").number());
    if (r->at("path").string() == "fma-peak") peaks.push_back(t);
    if (r->at("path").string() == "fused") ++fused[t];
  }
  EXPECT_EQ(peaks, (std::vector<int>{1, 2}));
  EXPECT_EQ(fused, (std::map<int, int>{{1, 1}, {2, 1}}));
}

// Every path of a shape, whatever its dtype, is timed in one interleaved
// window, so the f16 and bf16 rows compare with f32's run for run: the
// progress lines name one timing per shape, of as many paths as the JSON
// has timed rows.
TEST(BenchCommand, AllDtypesOfAShapeAreTimedTogether) {
  const Captured c =
      run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32,f16,bf16", "--threads", "1", "--reps", "1", "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::set<std::string> dtypes;
  int timed_rows = 0;
  for (const JsonObject* r : parse_rows(c.out)) {
    if (r->at("path").string() == "fma-peak" || r->at("ms").is_null()) continue;
    dtypes.insert(r->at("dtype").string());
    ++timed_rows;
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"f32", "f16", "bf16"}));
  std::vector<std::string> timings;
  std::istringstream lines(c.err);
  for (std::string l; std::getline(lines, l);)
    if (l.find(": timing ") != std::string::npos) timings.push_back(l);
  ASSERT_EQ(timings.size(), 1u) << c.err;
  EXPECT_NE(timings[0].find("64,2,4,64,32: timing " + std::to_string(timed_rows) + " paths interleaved"),
            std::string::npos)
      << timings[0] << " (" << timed_rows << " timed rows)";
}

// --max-memory caps what the timing holds: below what the dtypes need
// together (here below either one's alone, ~0.1 MiB each) each is timed in
// its own rounds, with a note naming the groups and the cap, and one for
// each dtype that holds more than the cap alone; a cap above what they need
// changes nothing. Every path is still timed.
TEST(BenchCommand, MaxMemoryTimesTheDtypesInGroupsThatFit) {
  for (const char* cap : {"0.00001", "1000"}) {
    SCOPED_TRACE(cap);
    const bool split = std::string(cap) == "0.00001";
    const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32,bf16", "--threads", "1", "--reps", "1",
                                  "--max-memory", cap, "--json"});
    ASSERT_EQ(c.status, 0) << c.err;
    int timed_rows = 0;
    for (const JsonObject* r : parse_rows(c.out)) {
      if (r->at("path").string() == "fma-peak" || r->at("ms").is_null()) continue;
      EXPECT_TRUE(r->at("ms_min").is_number()) << r->at("dtype").string() << " " << r->at("path").string();
      ++timed_rows;
    }
    EXPECT_GE(timed_rows, 5);  // f32: three paths; bf16: at least fused and nonfused
    std::vector<std::string> timings;
    std::istringstream lines(c.err);
    for (std::string l; std::getline(lines, l);)
      if (l.find(": timing ") != std::string::npos) timings.push_back(l);
    const size_t note = c.err.find("dtypes timed in separate rounds (f32 | bf16)");
    if (split) {
      ASSERT_EQ(timings.size(), 2u) << c.err;
      EXPECT_NE(timings[0].find("64,2,4,64,32 f32: timing 3 paths"), std::string::npos) << timings[0];
      EXPECT_NE(timings[1].find("64,2,4,64,32 bf16: timing "), std::string::npos) << timings[1];
      ASSERT_NE(note, std::string::npos) << c.err;
      EXPECT_NE(c.err.find("allowed (--max-memory)", note), std::string::npos) << c.err;
    } else {
      EXPECT_EQ(timings.size(), 1u) << c.err;
      EXPECT_EQ(note, std::string::npos) << c.err;
    }
    // Each dtype alone holds more than 0.00001 GiB: it is timed anyway,
    // and the run says so.
    for (const char* dtype : {"f32", "bf16"}) {
      const std::string alone = std::string(dtype) + "'s timing alone holds about ";
      EXPECT_EQ(c.err.find(alone) != std::string::npos, split) << c.err;
    }
  }
}

// Each path's peak RSS is what the process held while that path ran alone:
// glibc keeps freed blocks below its mmap threshold on its heaps, resident,
// so without giving them back first a path's mark would count what earlier
// paths freed. Here d_expanded_x (4*M*K = 8 MiB) and the other paths'
// buffers are heap blocks; at every thread count and dtype the non-fused
// path must show at least most of its intermediate above the fused one
// (which, with the buffers of the 1-thread rows left resident, read
// 0.7 MiB above it at 2 threads).
TEST(BenchCommand, EachPathsPeakRssCountsOnlyWhatItHolds) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator keeps freed memory in quarantine";
#endif
  const Captured c = run_bench({"--shape", "512,4,16,1024,256", "--dtype", "f32,bf16", "--reps", "1", "--json"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::map<std::string, std::map<std::string, double>> rss;  // "dtype threads" -> path -> bytes
  for (const JsonObject* r : parse_rows(c.out)) {
    const std::string path = r->at("path").string();
    if (path == "fma-peak" || r->at("mode").string() != "exact" || !r->at("peak_rss_bytes").is_number()) continue;
    rss[r->at("dtype").string() + " " + std::to_string(static_cast<int>(r->at("threads").number()))][path] =
        r->at("peak_rss_bytes").number();
  }
  if (rss.empty()) GTEST_SKIP() << "no peak RSS here (/proc/self/clear_refs)";
  const double intermediate = 4.0 * 2048 * 1024;
  for (auto& [group, by_path] : rss) {
    ASSERT_EQ(by_path.count("fused") + by_path.count("nonfused"), 2u) << group;
    EXPECT_GE(by_path["nonfused"] - by_path["fused"], 0.75 * intermediate)
        << group << ": fused " << by_path["fused"] << ", nonfused " << by_path["nonfused"];
  }
}

// Where a shape's dtypes would not fit in memory together, the timing
// splits them into consecutive groups that do; a dtype too large for the
// budget alone gets a group of its own; an unknown budget never splits.
TEST(BenchTimingGroups, SplitOnlyWhereTheBudgetRequires) {
  using moegrad::bench::timing_groups;
  const std::vector<uint64_t> zmoe_like = {4000, 2000, 2000};  // f32, f16, bf16
  EXPECT_EQ(timing_groups(zmoe_like, std::nullopt), (std::vector<size_t>{0}));
  EXPECT_EQ(timing_groups(zmoe_like, 8000), (std::vector<size_t>{0}));
  EXPECT_EQ(timing_groups(zmoe_like, 7999), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(timing_groups(zmoe_like, 5000), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(timing_groups(zmoe_like, 4000), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(timing_groups(zmoe_like, 3999), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(timing_groups(zmoe_like, 1999), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(timing_groups(zmoe_like, 0), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(timing_groups({}, 100), (std::vector<size_t>{}));
  EXPECT_EQ(timing_groups({7}, 1), (std::vector<size_t>{0}));
}

// Without --reps, a shape gets as many rounds as fit in 30 s of its warm-up
// round's length, at least 5 and at most 25 (--help says so).
TEST(BenchDefaultReps, RoundsThatFitInThirtySeconds) {
  using moegrad::bench::default_reps;
  EXPECT_EQ(default_reps(120.0), 5);   // zmoe-like: the minimum
  EXPECT_EQ(default_reps(7.0), 5);     // 30 / 7 = 4.3
  EXPECT_EQ(default_reps(6.0), 5);     // exactly 5
  EXPECT_EQ(default_reps(5.0), 6);
  EXPECT_EQ(default_reps(4.0), 8);     // 7.5, rounded up
  EXPECT_EQ(default_reps(2.0), 15);
  EXPECT_EQ(default_reps(1.25), 24);
  EXPECT_EQ(default_reps(1.0), 25);    // 30: the maximum
  EXPECT_EQ(default_reps(0.001), 25);
  EXPECT_EQ(default_reps(0.0), 25);    // too short to time
  EXPECT_EQ(default_reps(std::nan("")), 25);
}

// Without --reps the rounds follow the warm-up round's length, which the
// progress line shows (to the millisecond): the count must be the one that
// 30 s over that length gives, within 5 to 25, worked out here in float64
// at both ends of the printed value's rounding interval, so a slow host
// changes the count, never the verdict. The table shows the same count.
TEST(BenchCommand, DefaultRepsFollowTheWarmUpRound) {
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  const std::string marker = "interleaved, with the FMA loop, ";
  const size_t at = c.err.find(marker);
  ASSERT_NE(at, std::string::npos) << c.err;
  int rounds = 0;
  double warm_up = -1;
  ASSERT_EQ(std::sscanf(c.err.c_str() + at + marker.size(), "%d rounds (warm-up round %lf s)", &rounds, &warm_up), 2)
      << c.err.substr(at);
  ASSERT_GE(warm_up, 0);
  auto fit = [](double seconds) {
    if (seconds <= 0) return 25;
    return static_cast<int>(std::min(25.0, std::max(5.0, std::ceil(30.0 / seconds))));
  };
  EXPECT_GE(rounds, fit(warm_up + 0.0005)) << "warm-up " << warm_up << " s";
  EXPECT_LE(rounds, fit(warm_up - 0.0005)) << "warm-up " << warm_up << " s";
  EXPECT_NE(c.out.find("4*M*K = 32.0 KiB; " + std::to_string(rounds) + " reps)\n"), std::string::npos) << c.out;
}

TEST(BenchCommand, HumanTablePerShape) {
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--threads", "1", "--reps", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("fma-peak"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("64,2,4,64,32: batch 64"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("bitwise"), std::string::npos) << c.out;  // nonfused == fused
  // 4*M*K for M = 128, K = 64; one repetition, one round (stderr's progress).
  EXPECT_NE(c.out.find("4*M*K = 32.0 KiB; 1 rep)\n"), std::string::npos) << c.out;
  EXPECT_NE(c.err.find(", 1 round"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find(", 1 rounds"), std::string::npos) << c.err;
  // The loop's speed in this shape's own round, beside the run's fma-peak
  // (where the CPU has no AVX2 or AVX-512 there is no loop, and no note).
  const bool loop = c.out.find("fma-peak  1 thread: - GFLOP/s (none") == std::string::npos;
  EXPECT_EQ(c.out.find("  note: the FMA loop in this shape's rounds: 1 thread ") != std::string::npos, loop) << c.out;
}

// A path forced below the CPU's best (MOEGRAD_ISA) is shown beside its own
// ISA's FMA loop, in the header and, with --json, on stderr; the JSON keeps
// one fma-peak row, the best loop's. Not for the best path itself, nor the
// scalar one (no loop). The line's text: BenchReport.AForcedPathsLoopFollowsTheFmaPeakLine.
TEST(BenchCommand, AForcedPathIsShownBesideItsOwnLoop) {
  const bool avx512 = moegrad_isa_available(MOEGRAD_ISA_AVX512), avx2 = moegrad_isa_available(MOEGRAD_ISA_AVX2);
  const std::vector<std::string> args = {"--shape", "16,2,2,16,16", "--dtype", "f32", "--threads", "1", "--reps", "1"};
  for (const char* isa : {"auto", "scalar", "avx2", "avx512"}) {
    if ((isa == std::string("avx2") && !avx2) || (isa == std::string("avx512") && !avx512)) continue;
    SCOPED_TRACE(isa);
    const mgt::ScopedEnv env("MOEGRAD_ISA", std::string(isa));
    const bool own = isa == std::string("avx2") && avx512;
    const Captured table = run_bench(args);
    ASSERT_EQ(table.status, 0) << table.err;
    std::vector<std::string> json_args = args;
    json_args.push_back("--json");
    const Captured json = run_bench(json_args);
    ASSERT_EQ(json.status, 0) << json.err;
    const std::string line = "moegrad runs avx2, whose f32 FMA loop read 1 thread: ";
    const std::string header_line = "            " + line;  // under the fma-peak line
    const size_t at = table.out.find(header_line);
    EXPECT_EQ(at != std::string::npos, own) << table.out;
    EXPECT_EQ(json.err.find("moegrad: note: " + line) != std::string::npos, own) << json.err;
    EXPECT_EQ(table.out.find("whose f32 FMA loop read") != std::string::npos, own) << table.out;
    EXPECT_EQ(json.err.find("whose f32 FMA loop read") != std::string::npos, own) << json.err;
    int fma_rows = 0;
    for (const JsonObject* r : parse_rows(json.out)) fma_rows += r->at("path").string() == "fma-peak";
    EXPECT_EQ(fma_rows, 1) << json.out;
    if (own) {
      double gflops = 0;
      EXPECT_EQ(std::sscanf(table.out.c_str() + at + header_line.size(), "%lf GFLOP/s", &gflops), 1)
          << table.out.substr(at);
      EXPECT_GT(gflops, 0);
      EXPECT_NE(table.out.find("(avx512 f32 FMA loop:"), std::string::npos) << table.out;
    }
  }
}

// Thread counts follow the CPUs the process may use: pinned to one CPU,
// bench times one thread only, and asked for two it says that they share
// one CPU (in the table and, with --json, on stderr), which it does not say
// when each thread has its own.
TEST(BenchCommand, ThreadsBeyondTheAllowedCpusAreNoted) {
  const std::vector<int> cpus = moegrad::test::allowed_cpus();
  if (cpus.empty()) GTEST_SKIP() << "the affinity mask cannot be read";
  const std::string shared = "2 threads share the 1 CPU this process may use";
  Captured by_default, two, two_json;
  if (!moegrad::test::run_pinned({cpus.front()}, [&] {
    by_default = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--json"});
    two = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--threads", "2"});
    two_json = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--threads", "2", "--json"});
      }))
    GTEST_SKIP() << "a thread's affinity cannot be set here";
  ASSERT_EQ(by_default.status, 0) << by_default.err;
  EXPECT_NE(by_default.out.find("\"threads\": 1"), std::string::npos) << by_default.out;
  EXPECT_EQ(by_default.out.find("\"threads\": 2"), std::string::npos) << by_default.out;
  EXPECT_EQ(by_default.err.find("share"), std::string::npos) << by_default.err;
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("  note: " + shared + ": their times are not those of 2 cores"), std::string::npos)
      << two.out;
  ASSERT_EQ(two_json.status, 0) << two_json.err;
  EXPECT_NE(two_json.err.find("moegrad: note: " + shared), std::string::npos) << two_json.err;
  const std::optional<double> limit = moegrad::runtime::cgroup_cpu_limit();  // <= 1 CPU: they do share
  if (cpus.size() >= 2 && (!limit || *limit > 1)) {
    Captured own;
    ASSERT_TRUE(moegrad::test::run_pinned({cpus[0], cpus[1]}, [&] {
      own = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1", "--threads", "2"});
    }));
    ASSERT_EQ(own.status, 0) << own.err;
    EXPECT_EQ(own.out.find("share"), std::string::npos) << own.out;
  }
}

// With more than one thread count, each dtype gets a line of speed-ups over
// one thread for every path timed at both counts: the fused path's figure
// must be its 1-thread median over its median at the other count, both read
// from the table above it.
TEST(BenchCommand, HumanTableShowsTheSpeedupOverOneThread) {
  const size_t allowed = static_cast<size_t>(default_second_thread_count());
  if (allowed < 2) GTEST_SKIP() << "one usable CPU: bench times one thread count";
  const Captured c = run_bench({"--shape", "64,2,4,64,32", "--dtype", "f32", "--reps", "1"});
  ASSERT_EQ(c.status, 0) << c.err;
  std::map<long, double> fused_ms;  // threads -> median, from the table rows
  for (const TableRow& r : table_rows(c.out)) {
    if (r.dtype == "f32" && r.mode == "exact" && r.path == "fused") fused_ms[r.threads] = r.ms;
  }
  ASSERT_EQ(fused_ms.size(), 2u) << c.out;
  const std::string want = "  speedup   f32 exact, " + std::to_string(allowed) + " threads vs 1: fused ";
  const size_t at = c.out.find(want);
  ASSERT_NE(at, std::string::npos) << c.out;
  const std::string line = c.out.substr(at, c.out.find('\n', at) - at);
  // The table rounds each median to +-0.0005 ms, the line the ratio to
  // +-0.005: the shown figure must lie within what those bounds allow.
  const double shown = std::stod(line.substr(want.size()));
  const double m1 = fused_ms.at(1), mt = fused_ms.at(static_cast<long>(allowed));
  EXPECT_GE(shown, (m1 - 0.0005) / (mt + 0.0005) - 0.005) << line;
  EXPECT_LE(shown, (m1 + 0.0005) / std::max(mt - 0.0005, 1e-9) + 0.005) << line;
  EXPECT_NE(line.find(", nonfused "), std::string::npos) << line;
  EXPECT_EQ(line.back(), 'x') << line;
}

// A row that failed its check, made by hand (the end-to-end failure of a
// baseline is bench_cross_check_test's): every kind the runner flags.
moegrad::bench::Row checked_row(const std::string& shape, const std::string& dtype, const std::string& mode,
                                int threads, const std::string& path, bool failed) {
  return {.op = std::nullopt, .shape = shape, .batch = 64, .top_k = 2, .experts = 4, .k = 64, .n = 32, .dtype = dtype, .mode = mode,
          .threads = threads, .path = path, .ms = 2.0, .ms_min = 1.5, .ms_max = 3.0, .gflops = 7.0,
          .workspace_bytes = 4096, .peak_rss_bytes = 1 << 20, .check = failed ? "FAIL" : "ok", .check_failed = failed};
}

TEST(BenchReport, FailedChecksNameEachFailedRowInOrder) {
  using moegrad::bench::ShapeReport;
  std::vector<ShapeReport> reports(2);
  reports[0].rows = {checked_row("zmoe", "f32", "exact", 1, "fused", false),
                     checked_row("zmoe", "f32", "exact", 2, "fused", true),  // differs across threads
                     checked_row("zmoe", "f32", "exact", 1, "nonfused", true),
                     checked_row("zmoe", "bf16", "fast-bf16", 1, "fused", true),
                     checked_row("zmoe", "f32", "exact", 2, "onednn-nonfused", false)};
  reports[1].rows = {checked_row("8,2,2,16,16", "f16", "exact", 2, "onednn-nonfused", true),
                     checked_row("8,2,2,16,16", "bf16", "exact", 1, "onednn", true)};
  reports[1].rows[1].op = "weight-grad";  // a layer operator's row (--op) names its operator
  EXPECT_EQ(moegrad::bench::failed_checks(reports),
            (std::vector<std::string>{"zmoe f32 t=2 fused", "zmoe f32 t=1 nonfused", "zmoe bf16 t=1 fused fast-bf16",
                                      "8,2,2,16,16 f16 t=2 onednn-nonfused", "8,2,2,16,16 weight-grad bf16 t=1 onednn"}));
  reports[0].rows[1].check_failed = reports[0].rows[2].check_failed = reports[0].rows[3].check_failed = false;
  reports[1].rows[0].check_failed = reports[1].rows[1].check_failed = false;
  EXPECT_TRUE(moegrad::bench::failed_checks(reports).empty());
}

// The JSON has no check field: a failed row's times are null there, its
// other fields kept; a passing row keeps its times.
TEST(BenchReport, AFailedRowHasNullTimesInTheJson) {
  const std::vector<moegrad::bench::Row> rows = {checked_row("zmoe", "f32", "exact", 1, "nonfused", true),
                                                 checked_row("zmoe", "f32", "exact", 1, "fused", false)};
  const std::vector<const JsonObject*> parsed = parse_rows(moegrad::bench::json_text(rows));
  ASSERT_EQ(parsed.size(), 2u);
  for (const char* k : {"ms", "ms_min", "ms_max", "gflops"}) {
    EXPECT_TRUE(parsed[0]->at(k).is_null()) << k;
    ASSERT_TRUE(parsed[1]->at(k).is_number()) << k;
  }
  EXPECT_EQ(parsed[1]->at("ms").number(), 2.0);
  EXPECT_EQ(parsed[1]->at("gflops").number(), 7.0);
  EXPECT_EQ(parsed[0]->at("workspace_bytes").number(), 4096);
  EXPECT_EQ(parsed[0]->at("peak_rss_bytes").number(), 1 << 20);
  EXPECT_EQ(parsed[0]->at("path").string(), "nonfused");
}

// The forced path's line, from a MachineInfo made by hand (so it is checked
// on any CPU): every thread count's figure, after the fma-peak line, in the
// header of grad-x and of the layer operators alike; no line without rows.
TEST(BenchReport, AForcedPathsLoopFollowsTheFmaPeakLine) {
  moegrad::bench::MachineInfo machine;
  machine.cpu = "a CPU";
  machine.isa = "avx2";
  machine.onednn = "no oneDNN: test";
  machine.fma_isa = "avx512";
  machine.fma_peak.resize(2);
  machine.own_fma_peak.resize(2);
  for (int i = 0; i < 2; ++i) {
    machine.fma_peak[i].threads = machine.own_fma_peak[i].threads = 1 + i;
    machine.fma_peak[i].gflops = 200.0 * (1 + i);
    machine.own_fma_peak[i].gflops = 100.3 * (1 + i);
  }
  const std::string own = "moegrad runs avx2, whose f32 FMA loop read 1 thread: 100.3 GFLOP/s, 2 threads: 200.6 GFLOP/s"
                          " at the start; fma-peak is the avx512 loop's";
  EXPECT_EQ(moegrad::bench::own_fma_loop_note(machine), own);
  for (const moegrad::bench::BenchOp op :
       {moegrad::bench::BenchOp::kGradX, moegrad::bench::BenchOp::kForward, moegrad::bench::BenchOp::kWeightGrad}) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    moegrad::bench::print_header(f, machine, op);
    const std::string text = read_all(f);
    std::fclose(f);
    EXPECT_NE(text.find("  fma-peak  1 thread: 200.0 GFLOP/s, 2 threads: 400.0 GFLOP/s (avx512 f32 FMA loop:\n"
                        "            median of its runs at the start and in every shape's timing rounds)\n"
                        "            " + own + "\n"),
              std::string::npos)
        << text;
  }
  machine.own_fma_peak.clear();
  EXPECT_EQ(moegrad::bench::own_fma_loop_note(machine), std::nullopt);
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  moegrad::bench::print_header(f, machine);
  const std::string text = read_all(f);
  std::fclose(f);
  EXPECT_EQ(text.find("whose f32 FMA loop"), std::string::npos) << text;
}

TEST(BenchCommand, HelpExitsZero) {
  const Captured c = run_bench({"--bogus", "--help"});
  EXPECT_EQ(c.status, 0);
  EXPECT_NE(c.out.find("Usage: moegrad bench"), std::string::npos);
}

TEST(BenchCommand, BadArgumentsExitTwoWithOneErrorLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"--bogus"},
      {"extra"},
      {"--threads", "0"},
      {"--threads", "2x"},
      {"--threads", "1,0"},
      {"--threads", "1,,2"},
      {"--threads", "1", "--threads", "2"},
      {"--threads"},
      {"--threads", "--json"},
      {"--reps", "0"},
      {"--json", "--json"},
      {"--json=1"},
      {"--shape", "nope"},
      {"--shape", "zmoe,nope"},
      {"--shape", "1,2,3"},
      {"--shape", "64,5,4,64,32"},  // top_k > G
      {"--shape", "64,2,4,0,32"},
      {"--shape", "2000000000,2,4,64,32"},  // M overflows int32
      {"--shape", "1,1,8,1073741824,1073741824"},  // the weight's 2^64 bytes wrapped to 0 and crashed
      {"--threads", "4097"},
      {"--dtype", "f64"},
      {"--dtype="},
      {"--max-memory", "0"},
      {"--max-memory", "-1"},
      {"--max-memory", "1e3"},
      {"--max-memory", "2GB"},
      {"--max-memory", "2000000"},  // above 1 PiB
      {"--max-memory", "1", "--max-memory", "2"},
      {"--json-file"},
      {"--json-file="},
      {"--json-file", "--json"},
      {"--json-file", "a.json", "--json-file", "b.json"},
      {"--op"},
      {"--op", "backward"},
      {"--op", "forward", "--op", "weight-grad"},
      {"--op", "forward", "--max-memory", "1"},  // the layer operators time each dtype alone
  };
  for (const auto& args : cases) {
    const Captured c = run_bench(args);
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    EXPECT_EQ(c.status, 2) << joined;
    EXPECT_TRUE(c.out.empty()) << joined;
    EXPECT_EQ(c.err.rfind("moegrad: error: ", 0), 0u) << joined << ": " << c.err;
    EXPECT_EQ(c.err.find('\n'), c.err.size() - 1) << joined << ": " << c.err;
  }
}

// A shape's number is named with what is wrong with it: malformed (a sign,
// a space, a suffix) or out of range.
TEST(BenchCommand, AShapeNumberIsNamedWithWhatIsWrongWithIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"+8,2,3,16,8", "batch '+8' is not a decimal integer"},
      {"8, 2,3,16,8", "top_k ' 2' is not a decimal integer"},
      {"8,2,3,16x,8", "K '16x' is not a decimal integer"},
      {"8,2,3,16,99999999999999999999", "N '99999999999999999999' is not a decimal integer"},
      {"8,2,0,16,8", "G '0' is not in [1, 2147483647]"},
      {"8,2,3,16,-8", "N '-8' is not in [1, 2147483647]"},
      {"8,2,3,2147483648,8", "K '2147483648' is not in [1, 2147483647]"},
  };
  for (const auto& [shape, message] : cases) {
    const Captured c = run_bench({"--shape", shape});
    EXPECT_EQ(c.status, 2) << shape;
    EXPECT_EQ(c.err, "moegrad: error: bench: --shape " + shape + ": " + message + " (see 'moegrad bench --help')\n");
  }
}

}  // namespace

namespace {

// A path whose warm-up run took under 20 ms runs untimed, back to back,
// until those runs add up to 10 ms, right before each timed run (so a short
// call is timed with its caches and its threads' CPUs as a loop of calls
// leaves them, not as 20 ms of idle leaves them), and so, then, does every
// other path whose warm-up ran under 100 ms (paths are compared with each
// other: they are timed alike); a path past 100 ms runs once. A warm-up
// run of 20 to 100 ms is followed by a second, and the faster decides (a
// first run also touches new buffers); after the warm-up nothing changes
// the decision. The paths report made-up times and count their calls; no
// clock is read.
TEST(InterleavedTiming, AShortPathRunsUntimedFor10MsRightBeforeEachTimedRun) {
  int short_calls = 0, long_calls = 0, later_short_calls = 0, slow_first_calls = 0, much_later_calls = 0;
  double short_ms = 1.0;
  auto path = [](std::function<double()> run) {
    return moegrad::bench::TimedPath{[] { return true; }, std::move(run), [] {}, {}, false};
  };
  // 1, 2, 3, ... ms: after the 1 ms warm-up, the untimed runs of round r
  // are the first to reach 10 ms together, and the next run is timed.
  moegrad::bench::TimedPath short_path = path([&] {
    ++short_calls;
    return short_ms++;
  });
  // 50 ms: primed as the short ones are, one untimed run a round.
  moegrad::bench::TimedPath long_path = path([&] {
    ++long_calls;
    return 50.0;
  });
  // 150 ms, then 1 ms: past the second look, so never primed.
  moegrad::bench::TimedPath later_short_path = path([&] { return ++later_short_calls == 1 ? 150.0 : 1.0; });
  // 50 ms (its buffers' first touch), then 4 ms a call: primed after the
  // second look. Its untimed runs: 4+4+4 = 12 ms before each timed one.
  moegrad::bench::TimedPath slow_first_path = path([&] { return ++slow_first_calls == 1 ? 50.0 : 4.0; });
  // 50, 50, then 1 ms: primed for its 50 ms warm-up beside the short ones;
  // 10 untimed runs of 1 ms a round then.
  moegrad::bench::TimedPath much_later_path = path([&] { return ++much_later_calls <= 2 ? 50.0 : 1.0; });
  std::vector<moegrad::bench::TimedPath*> paths{&short_path, &long_path, &later_short_path, &slow_first_path,
                                                &much_later_path};
  moegrad::bench::warm_up(paths);
  EXPECT_EQ(short_calls, 1);  // nothing known of it yet: no untimed run
  EXPECT_EQ(long_calls, 2);   // 50 ms: a second look, also 50
  EXPECT_EQ(later_short_calls, 1);
  EXPECT_EQ(slow_first_calls, 2);
  EXPECT_EQ(much_later_calls, 2);
  moegrad::bench::time_interleaved(paths, 3);
  // Round 1: untimed 2+3+4+5 = 14 ms, timed 6. Round 2: untimed 7+8 = 15,
  // timed 9. Round 3: untimed 10, timed 11.
  EXPECT_EQ(short_calls, 1 + (4 + 1) + (2 + 1) + (1 + 1));
  EXPECT_EQ(long_calls, 2 + 3 * (1 + 1));
  EXPECT_EQ(later_short_calls, 1 + 3);
  EXPECT_EQ(slow_first_calls, 2 + 3 * (3 + 1));
  EXPECT_EQ(much_later_calls, 2 + 3 * (10 + 1));
  EXPECT_EQ(short_path.ms.min, 6.0);
  EXPECT_EQ(short_path.ms.median, 9.0);
  EXPECT_EQ(short_path.ms.max, 11.0);
  EXPECT_EQ(long_path.ms.median, 50.0);
  EXPECT_EQ(later_short_path.ms.median, 1.0);
  EXPECT_EQ(slow_first_path.ms.median, 4.0);
  EXPECT_EQ(much_later_path.ms.median, 1.0);
}

// Without a path under 20 ms none is primed, whatever runs under 100 ms;
// a path that may not be primed (the FMA loop's) is neither primed nor
// makes the others be.
TEST(InterleavedTiming, PathsAreOnlyPrimedBesideAShortOne) {
  int a_calls = 0, b_calls = 0, loop_calls = 0;
  moegrad::bench::TimedPath a{[] { return true; }, [&] { return ++a_calls, 30.0; }, [] {}, {}, false};
  moegrad::bench::TimedPath b{[] { return true; }, [&] { return ++b_calls, 90.0; }, [] {}, {}, false};
  moegrad::bench::TimedPath loop{[] { return true; }, [&] { return ++loop_calls, 5.0; }, [] {}, {}, false, {}, false};
  std::vector<moegrad::bench::TimedPath*> paths{&a, &b, &loop};
  const double round_seconds = moegrad::bench::warm_up(paths);
  EXPECT_FALSE(a.primed);
  EXPECT_FALSE(b.primed);
  EXPECT_FALSE(loop.primed);
  moegrad::bench::time_interleaved(paths, 2);
  EXPECT_EQ(a_calls, 2 + 2);  // a second look each (20 to 100 ms), then one run a round
  EXPECT_EQ(b_calls, 2 + 2);
  EXPECT_EQ(loop_calls, 1 + 2);
  EXPECT_GE(round_seconds, 0.0);
  // With a 4 ms path beside them, the two are primed (one untimed run a
  // round each); the loop still is not.
  int c_calls = 0;
  moegrad::bench::TimedPath c{[] { return true; }, [&] { return ++c_calls, 4.0; }, [] {}, {}, false};
  paths.push_back(&c);
  moegrad::bench::warm_up(paths);
  EXPECT_TRUE(a.primed);
  EXPECT_TRUE(b.primed);
  EXPECT_TRUE(c.primed);
  EXPECT_FALSE(loop.primed);
  a_calls = b_calls = loop_calls = c_calls = 0;
  moegrad::bench::time_interleaved(paths, 2);
  EXPECT_EQ(a_calls, 2 * (1 + 1));
  EXPECT_EQ(b_calls, 2 * (1 + 1));
  EXPECT_EQ(c_calls, 2 * (3 + 1));  // 4+4+4 = 12 ms untimed, then the timed one
  EXPECT_EQ(loop_calls, 2);
}

// Only a timed run of a path is kept: kept() follows each of the rounds'
// runs, not the warm-up's (two here: 50 ms) nor the untimed runs before a
// primed path's timed ones (both are primed: one is short). So the FMA loop's peak, a median of the runs it
// keeps, has no warm-up run in it, as a path's median has none: its runs
// count grows by the rounds alone.
TEST(InterleavedTiming, OnlyTimedRunsAreKept) {
  int runs = 0, kept = 0, short_runs = 0, short_kept = 0;
  moegrad::bench::TimedPath path{[] { return true; }, [&] { return ++runs, 50.0; }, [] {}, {}, false,
                                 [&] { ++kept; }};
  moegrad::bench::TimedPath short_path{[] { return true; }, [&] { return ++short_runs, 1.0; }, [] {}, {}, false,
                                       [&] { ++short_kept; }};
  std::vector<moegrad::bench::TimedPath*> paths{&path, &short_path};
  moegrad::bench::warm_up(paths);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(kept, 0);
  EXPECT_EQ(short_kept, 0);
  moegrad::bench::time_interleaved(paths, 3);
  EXPECT_EQ(runs, 2 + 3 * (1 + 1));
  EXPECT_EQ(kept, 3);
  EXPECT_EQ(short_runs, 1 + 3 * (10 + 1));
  EXPECT_EQ(short_kept, 3);

  moegrad::bench::FmaLoop loop(1);
  if (!loop.available()) GTEST_SKIP() << "no FMA loop on this CPU";
  std::vector<moegrad::bench::TimedPath> loop_paths = moegrad::bench::fma_loop_paths({&loop});
  ASSERT_EQ(loop_paths.size(), 1u);
  std::vector<moegrad::bench::TimedPath*> loop_path{&loop_paths[0]};
  moegrad::bench::warm_up(loop_path);
  EXPECT_EQ(loop.runs(), 0u);
  EXPECT_EQ(loop.peak_gflops(), std::nullopt);
  moegrad::bench::time_interleaved(loop_path, 2);
  EXPECT_EQ(loop.runs(), 2u);
  EXPECT_GT(loop.peak_gflops().value_or(0), 0);
}

// What the bench prints as ms, ms_min and ms_max, on samples in any order:
// the middle one of an odd count, the mean of the middle two of an even
// one; and the quantiles between samples, interpolated (worked out by hand).
TEST(Stats, MedianMinAndMaxOfOddAndEvenCounts) {
  const struct {
    std::vector<double> samples;
    double median, min, max;
  } cases[] = {
      {{5.0}, 5.0, 5.0, 5.0},
      {{3.0, 1.0}, 2.0, 1.0, 3.0},
      {{9.0, 1.0, 5.0}, 5.0, 1.0, 9.0},
      {{4.0, 1.0, 3.0, 2.0}, 2.5, 1.0, 4.0},
      {{7.0, 7.0, 1.0, 7.0, 2.0}, 7.0, 1.0, 7.0},
  };
  for (const auto& c : cases) {
    const moegrad::bench::Stats s = moegrad::bench::summarize(c.samples);
    EXPECT_EQ(s.median, c.median) << ::testing::PrintToString(c.samples);
    EXPECT_EQ(s.min, c.min) << ::testing::PrintToString(c.samples);
    EXPECT_EQ(s.max, c.max) << ::testing::PrintToString(c.samples);
  }
  EXPECT_EQ(moegrad::bench::sorted_quantile({1.0, 2.0, 3.0, 4.0, 5.0}, 0.25), 2.0);
  EXPECT_EQ(moegrad::bench::sorted_quantile({10.0, 20.0}, 0.75), 17.5);
  EXPECT_EQ(moegrad::bench::sorted_quantile({10.0, 20.0}, 1.0), 20.0);
  EXPECT_EQ(moegrad::bench::sorted_quantile({10.0, 20.0}, 0.0), 10.0);
}

}  // namespace

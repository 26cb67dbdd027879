// `moegrad bench` run in-process (run_bench_command) with stdout and stderr
// captured, and its --json output read into rows held to the keys.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "bench_command.h"
#include "json_reader.h"

namespace moegrad::bench::test {

struct Captured {
  int status = -1;
  std::string out, err;
};

inline std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  return text;
}

inline Captured run_bench(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  ::dup2(::fileno(out), STDOUT_FILENO);
  ::dup2(::fileno(err), STDERR_FILENO);
  Captured c;
  c.status = moegrad::bench::run_bench_command(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  ::close(saved_out);
  ::close(saved_err);
  c.out = read_all(out);
  c.err = read_all(err);
  std::fclose(out);
  std::fclose(err);
  return c;
}

inline const std::set<std::string> kKeys = {"shape", "batch", "top_k", "experts", "k", "n", "dtype", "mode",
                                            "threads", "path", "ms", "ms_min", "ms_max", "gflops",
                                            "workspace_bytes", "peak_rss_bytes"};

// layer_op: the rows of a `--op forward|weight-grad` run, whose measured
// rows (not fma-peak's) have an "op" key besides the issue's.
inline std::vector<const JsonObject*> parse_rows(const std::string& text, bool layer_op = false) {
  Json doc;
  EXPECT_TRUE(JsonParser(text).parse(&doc)) << "not one JSON value:\n" << text;
  std::vector<const JsonObject*> rows;
  const JsonArray* arr = doc.array();
  EXPECT_NE(arr, nullptr) << "not a JSON array:\n" << text;
  if (arr == nullptr) return rows;
  static std::vector<Json> keep;  // the rows point into it
  keep.push_back(doc);
  for (const Json& item : *arr) {
    const JsonObject* obj = item.object();
    EXPECT_NE(obj, nullptr);
    if (obj == nullptr) continue;
    std::set<std::string> keys, expected = kKeys;
    for (const auto& [k, v] : *obj) keys.insert(k);
    const auto path = obj->find("path");
    if (layer_op && !(path != obj->end() && path->second.is_string() && path->second.string() == "fma-peak"))
      expected.insert("op");
    EXPECT_EQ(keys, expected);
    rows.push_back(obj);
  }
  return rows;
}

}  // namespace moegrad::bench::test

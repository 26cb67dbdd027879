// What both of `moegrad bench`'s runners (grad-x's, the layer operators')
// use to check a path and to word the result: a hash of an output's bits,
// the tolerance a baseline that
// sums in another order is held to, the NaN fill of an output, a shape's
// notes and numbers in text.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "aligned_buffer.h"
#include "bench_report.h"
#include "grad_x_diff.h"

namespace moegrad::bench {

// A 64-bit hash of a buffer's bytes: each step is a bijection of the state
// for a given word, so outputs that differ in one word always hash apart,
// and otherwise collide with a chance of about 2^-64 (murmur's finalizer
// at the end).
inline uint64_t bits_hash(const cli::AlignedBuffer& b) {
  const std::byte* bytes = b.data();
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < b.size(); i += sizeof(uint64_t)) {
    uint64_t w = 0;
    std::memcpy(&w, bytes + i, std::min(sizeof(uint64_t), b.size() - i));
    h = (h ^ w) * 0xff51afd7ed558ccdu;
    h ^= h >> 32;
  }
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53u;
  return h ^ (h >> 33);
}

// oneDNN and the fast bf16 mode sum in another order: they must agree with
// the reference output to this fraction of its largest magnitude.
inline constexpr double kRelTolerance = 1e-3;

inline std::string format_g(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Outputs start NaN-filled, so an element a path leaves unwritten fails its
// check (compare() counts a NaN as an infinite difference).
inline void fill_nan(const cli::AlignedBuffer& b) {
  std::fill_n(b.as<float>(), b.size() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
}

// Each note once, in order.
inline void add_note(ShapeReport* report, const std::string& note) {
  if (std::find(report->notes.begin(), report->notes.end(), note) == report->notes.end()) report->notes.push_back(note);
}

// A measurement's row before its path and times: the shape, the dtype, the
// exact mode and the thread count.
inline Row shape_row(const ShapeSpec& shape, const std::string& dtype, int threads) {
  Row r;
  r.shape = shape.name;
  r.batch = shape.batch;
  r.top_k = shape.top_k;
  r.experts = shape.experts;
  r.k = shape.k;
  r.n = shape.n;
  r.dtype = dtype;
  r.mode = "exact";
  r.threads = threads;
  return r;
}

// `out` against `ref` within kRelTolerance * max |ref|: sets row->check to
// "rel 2.2e-06" or "FAIL rel ..." (then check_failed too). Returns the
// failure's explanation for a warning ("" when it passed):
// "max |diff| = X > 1e-03 * max |<name>| = Y".
inline std::string tolerance_check(const float* out, const float* ref, size_t count, const std::string& name,
                                   Row* row) {
  const Diff diff = compare(out, ref, count);
  const double rel = diff.max_abs_ref > 0 ? diff.max_abs_diff / diff.max_abs_ref
                                          : (diff.max_abs_diff > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  if (diff.max_abs_diff <= kRelTolerance * diff.max_abs_ref) {
    row->check = format_g("rel %.1e", rel);
    return "";
  }
  row->check = format_g("FAIL rel %.1e", rel);
  row->check_failed = true;
  return "max |diff| = " + format_g("%.3g", diff.max_abs_diff) + " > " + format_g("%.0e", kRelTolerance) +
         " * max |" + name + "| = " + format_g("%.3g", kRelTolerance * diff.max_abs_ref);
}

// The reference path's output against float64 sums on a sample
// (cli/reference_check.h, layer_op_reference.h): sets row->check to "ref,
// f64 0.031" (the largest error as a fraction of the bound) or "ref, FAIL
// f64 ..." (then check_failed too). Returns the failure's explanation for a
// warning ("" when it passed).
inline std::string float64_check(bool within_bound, double error_over_bound, const std::string& name, Row* row) {
  const std::string ratio = format_g("%.2g", error_over_bound);
  if (within_bound) {
    row->check = "ref, f64 " + ratio;
    return "";
  }
  row->check = "ref, FAIL f64 " + ratio;
  row->check_failed = true;
  return name + " exceeds the float64 reference's error bound (largest error " + ratio + " times the bound)";
}

}  // namespace moegrad::bench

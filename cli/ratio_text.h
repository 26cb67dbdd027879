// The workspace against 4*M*K, as `moegrad run` and the `moegrad bench`
// table print it: one function, so both keep the same width.
#pragma once

#include <cstdio>
#include <string>

namespace moegrad::cli {

// At most six characters, the width of "%.4f" below 1 ("0.0051", the form
// the README's tables quote, unchanged): one decimal fewer per digit before
// the point ("1.0051", "11.062", "279.99", "17280"), so a tiny shape's
// workspace, thousands of times its 4*M*K, stays in the table's column.
// From 999999.5 on, one significant digit ("2e+07"): a ratio that large
// only says that the shape is tiny.
inline std::string ratio_text(double ratio) {
  char buf[32];
  for (int decimals = 4; decimals >= 0; --decimals) {
    // The width is measured after rounding: 9.99996 is "10.000", not "10.0000".
    if (std::snprintf(buf, sizeof buf, "%.*f", decimals, ratio) <= 6) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0e", ratio);
  return buf;
}

}  // namespace moegrad::cli

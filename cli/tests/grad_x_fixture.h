// Writes a MoeProblem as .npy files in any supported encoding, builds the
// matching grad-x command line, and reads the output back with a check of
// its header.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "moe_problem.h"

namespace moegrad::cli_test {

enum class Elem { kF32, kF16, kBF16 };
enum class Index { kI32, kI64 };

struct Encoding {
  Elem elem = Elem::kF32;
  int row_idx_type = 0;
  Index index = Index::kI64;
  bool cumsum = false;
};

std::string encoding_name(const Encoding& e);
// Readable parameters in gtest output.
inline void PrintTo(const Encoding& e, std::ostream* os) { *os << encoding_name(e); }

// "<f4" / "<f2" / "<u2" and the element bytes of `values` in that encoding.
std::string elem_descr(Elem e);
std::string elem_bytes(Elem e, const std::vector<int>& values);
std::string index_npy(Index t, const std::vector<int64_t>& values);

class GradXTest : public CliTest {
 protected:
  // gy.npy, w.npy, idx.npy, gl.npy
  void write_problem(const MoeProblem& p, const Encoding& e);
  // The full grad-x command line for the files above, writing `out`.
  std::vector<std::string> args(const MoeProblem& p, const Encoding& e,
                                const std::string& out = "dx.npy") const;
  // Parses `name` as a C-order <f4 [rows, cols] .npy (v1 header, data
  // 64-byte aligned, as numpy.save writes it).
  std::vector<float> read_grad_x(const std::string& name, int64_t rows, int64_t cols) const;
};

}  // namespace moegrad::cli_test

#include "grad_x_fixture.h"

#include <cstdint>
#include <cstring>

#include "npy_bytes.h"

namespace moegrad::cli_test {

std::string encoding_name(const Encoding& e) {
  const char* elem = e.elem == Elem::kF32 ? "f32" : (e.elem == Elem::kF16 ? "f16" : "bf16");
  return std::string(elem) + "_type" + std::to_string(e.row_idx_type) +
         (e.index == Index::kI32 ? "_i32" : "_i64") + (e.cumsum ? "_cumsum" : "_count");
}

std::string elem_descr(Elem e) {
  return e == Elem::kF32 ? "<f4" : (e == Elem::kF16 ? "<f2" : "<u2");
}

std::string elem_bytes(Elem e, const std::vector<int>& values) {
  if (e == Elem::kF32) return raw_bytes(std::vector<float>(values.begin(), values.end()));
  std::vector<uint16_t> bits;
  for (const int v : values) bits.push_back(e == Elem::kF16 ? f16_bits(v) : bf16_bits(v));
  return raw_bytes(bits);
}

std::string index_npy(Index t, const std::vector<int64_t>& values) {
  const std::vector<int64_t> shape{static_cast<int64_t>(values.size())};
  if (t == Index::kI64) return npy_array("<i8", shape, values);
  return npy_array("<i4", shape, std::vector<int32_t>(values.begin(), values.end()));
}

void GradXTest::write_problem(const MoeProblem& p, const Encoding& e) {
  write_file("gy.npy",
             npy_file(numpy_dict(elem_descr(e.elem), {p.m(), p.n}), elem_bytes(e.elem, p.grad_y)));
  write_file("w.npy", npy_file(numpy_dict(elem_descr(e.elem), {p.experts, p.k, p.n}),
                               elem_bytes(e.elem, p.weight)));
  write_file("idx.npy",
             index_npy(e.index, e.row_idx_type == 0 ? p.row_idx_type0() : p.row_idx_type1()));
  write_file("gl.npy", index_npy(e.index, e.cumsum ? p.cumsum() : p.counts));
}

std::vector<std::string> GradXTest::args(const MoeProblem& p, const Encoding& e,
                                         const std::string& out) const {
  std::vector<std::string> a{"grad-x",
                             "--grad-y",
                             path("gy.npy"),
                             "--weight",
                             path("w.npy"),
                             "--row-idx",
                             path("idx.npy"),
                             "--group-list",
                             path("gl.npy"),
                             "--batch",
                             std::to_string(p.batch),
                             "--top-k",
                             std::to_string(p.top_k),
                             "--row-idx-type",
                             std::to_string(e.row_idx_type),
                             "--group-list-type",
                             e.cumsum ? "cumsum" : "count",
                             "--out",
                             path(out)};
  if (e.elem == Elem::kBF16) a.push_back("--bf16");
  return a;
}

std::vector<float> GradXTest::read_grad_x(const std::string& name, int64_t rows,
                                          int64_t cols) const {
  const std::string bytes = read_file(name);
  EXPECT_GE(bytes.size(), 10u);
  if (bytes.size() < 10) return {};
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) |
      (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  const std::size_t data_offset = 10 + header_len;
  EXPECT_EQ(data_offset % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': " + shape_tuple({rows, cols})), std::string::npos) << header;
  EXPECT_EQ(header.back(), '\n');
  const std::size_t count = static_cast<std::size_t>(rows * cols);
  EXPECT_EQ(bytes.size(), data_offset + count * 4);
  std::vector<float> out(count);
  if (bytes.size() == data_offset + count * 4)
    std::memcpy(out.data(), bytes.data() + data_offset, count * 4);
  return out;
}

}  // namespace moegrad::cli_test

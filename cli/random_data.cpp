#include "random_data.h"

#include "parallel_for.h"

namespace moegrad::cli {
namespace {

// One loop per format, so the format is not re-decided per element.
template <class Store>
void fill(uint64_t count, uint64_t seed, uint64_t stream, Store store) {
  parallel_for(count, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      const uint64_t bits = random_u64(seed, stream, i) >> 40;  // 24 random bits
      store(i, static_cast<float>(static_cast<int64_t>(bits) - (1 << 23)) * 0x1p-23f);
    }
  });
}

}  // namespace

void fill_uniform(void* dst, FloatFormat format, uint64_t count, uint64_t seed, uint64_t stream) {
  switch (format) {
    case FloatFormat::kF32:
      fill(count, seed, stream, [p = static_cast<float*>(dst)](uint64_t i, float v) { p[i] = v; });
      break;
    case FloatFormat::kF16:
      fill(count, seed, stream,
           [p = static_cast<uint16_t*>(dst)](uint64_t i, float v) { p[i] = f32_to_f16_bits(v); });
      break;
    case FloatFormat::kBF16:
      fill(count, seed, stream,
           [p = static_cast<uint16_t*>(dst)](uint64_t i, float v) { p[i] = f32_to_bf16_bits(v); });
      break;
  }
}

}  // namespace moegrad::cli

// libFuzzer target: the layer operators' (moegrad_layer.h) validation and
// execution driven by fuzzer-chosen operators, shapes, strides, dtypes,
// attributes, index contents, faults and API misuse. The decoding and every
// check live in tests/hardening/kit/ops_case.cpp, shared with the corpus
// replay test.
#include "fuzz_target.h"
#include "ops_case.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mgh::prepare_ops_contexts();
  return 0;
}

MGH_FUZZ_TARGET("fuzz_ops", mgh::check_ops_input)

// libFuzzer target: the operator's validation and execution path driven by
// fuzzer-chosen shapes, strides, dtypes, attributes, index contents, faults
// and API misuse. The decoding and every check live in
// tests/hardening/kit/grad_x_case.cpp, shared with the corpus replay test.
#include "fuzz_target.h"
#include "grad_x_case.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mgh::prepare_grad_x_contexts();
  return 0;
}

MGH_FUZZ_TARGET("fuzz_grad_x", mgh::check_grad_x_input)

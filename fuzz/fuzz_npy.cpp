// libFuzzer target: the CLI's .npy reader (cli/npy.h), header grammar and
// whole-file load. The checks live in tests/hardening/kit/npy_case.cpp,
// shared with the corpus replay test.
#include "fuzz_target.h"
#include "npy_case.h"

MGH_FUZZ_TARGET("fuzz_npy", mgh::check_npy_input)

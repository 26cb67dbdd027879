// The problem the fork tests run in their children: small, every expert
// used, checked bit for bit against the contract's float64 reference.
#pragma once

#include <moegrad/moegrad.h>

#include <vector>

#include "problem.h"
#include "reference.h"
#include "runner.h"

namespace mgh {

struct ForkCase {
  Problem problem;
  std::vector<float> want;
  ForkCase() : problem(spec()), want(reference_contract(problem.args())) {}
  static ProblemSpec spec() {
    ProblemSpec s;
    s.batch = 40, s.top_k = 2, s.G = 5, s.N = 37, s.K = 53, s.values = Values::kUniform, s.seed = 211;
    return s;
  }
  // Runs on ctx (NULL: the default context) into a NaN-filled grad_x.
  bool run_matches(const moegrad_context* ctx) const {
    Tensor grad_x(kF32, problem.grad_x.shape(), problem.grad_x.strides(), false);
    grad_x.fill_words(0x7FC0DEADu);
    moegrad_grad_x_args args = problem.args();
    args.grad_x = &grad_x.dl();
    RunOptions opt;
    opt.plan_ctx = opt.run_ctx = ctx;
    if (!run_grad_x(&args, opt).ok()) return false;
    return compare_bits(read_grad_x(grad_x.dl()), want, problem.spec.K).empty();
  }
};

}  // namespace mgh

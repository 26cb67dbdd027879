#!/usr/bin/env python3
"""Trains a tiny Mixture-of-Experts layer with moegrad on random data.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_moe_layer.py [--steps 20] [--dtype bfloat16]

The layer: a stem (nn.Linear, standing for the layers below it) makes the
activations; a router (nn.Linear + softmax + top-k) picks top_k experts per
token; moegrad.torch.MoEExperts runs the experts (moe_init_routing +
grouped_matmul forward; fused grad-x + weight grad backward); moe_combine
weights and sums the expert outputs per token. The experts' input is the
stem's output, so backward needs its gradient: that is the fused grad-x,
which reaches the stem's weights. The target is a fixed random teacher of
the same shape, so the loss goes down: the script exits with 1 unless it
does, or if a step's grad_x is missing, not finite or all zero.

float16 is not offered: torch 1.13's Adam has no Half kernel on the CPU
("addcmul_cpu_out" not implemented for 'Half'). moegrad takes float16
experts as it takes bfloat16 ones (its tests run both).
"""

import argparse

import torch

import moegrad
import moegrad.torch as mgt


class TinyMoE(torch.nn.Module):
    def __init__(self, hidden, ffn, experts, top_k, dtype, context):
        super().__init__()
        self.top_k = top_k
        self.stem = torch.nn.Linear(hidden, hidden, dtype=torch.float32)
        self.router = torch.nn.Linear(hidden, experts, dtype=torch.float32)
        self.experts = mgt.MoEExperts(experts, hidden, ffn, dtype=dtype, context=context)
        self.proj = torch.nn.Linear(ffn, hidden, dtype=torch.float32)
        self.grad_x = None  # the last backward's gradient of the experts' input

    def record_grad_x(self, grad):
        self.grad_x = grad

    def forward(self, x):
        x = self.stem(x)
        probs = torch.softmax(self.router(x), dim=-1)
        weights, expert_idx = torch.topk(probs, self.top_k, dim=-1)
        # A copy of its own, so the hook sees only the gradient the experts'
        # backward (moegrad's fused grad-x) gives it, not the router's.
        expert_in = x.to(self.experts.weight.dtype, copy=True)
        expert_in.register_hook(self.record_grad_x)
        y, row_idx, group_list = self.experts(expert_in, expert_idx)
        h = mgt.moe_combine(y.float(), row_idx, x.shape[0], self.top_k, weights)
        return self.proj(torch.relu(h)), y.shape[0], group_list


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="at least 2: the loss must go down")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--ffn", type=int, default=128)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--threads", type=int, default=0, help="moegrad threads (0: default)")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error(f"--steps {args.steps}: at least 2 (the first and the last loss are compared)")

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    context = moegrad.Context(num_threads=args.threads)
    model = TinyMoE(args.hidden, args.ffn, args.experts, args.top_k, dtype, context)
    teacher = torch.nn.Sequential(torch.nn.Linear(args.hidden, args.hidden), torch.nn.Tanh())
    x = torch.randn(args.tokens, args.hidden)
    with torch.no_grad():
        target = teacher(x)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    print(f"moegrad {moegrad.__version__}: {args.tokens} tokens, {args.experts} experts, top_k={args.top_k}, "
          f"K={args.hidden}, N={args.ffn}, {args.dtype}, {context.num_threads} threads, isa={context.isa}")
    losses = []
    for step in range(args.steps):
        out, rows, group_list = model(x)
        loss = torch.nn.functional.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        grad_x = model.grad_x
        if grad_x is None or not torch.isfinite(grad_x).all() or not grad_x.any():
            print(f"step {step}: the experts' backward gave no finite, nonzero grad_x")
            return 1
        model.grad_x = None
        print(f"step {step:3d}  loss {losses[-1]:.5f}  |grad_x| {grad_x.float().norm():.4f}  "
              f"rows per expert {group_list.tolist()}")

    # The non-fused backward would hold d_expanded_x [M, K] (M = expanded rows)
    # in x's dtype; moegrad's fused grad-x never allocates it.
    saved = rows * args.hidden * torch.tensor([], dtype=dtype).element_size()
    print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f} ({'down' if losses[-1] < losses[0] else 'NOT down'})")
    print(f"d_expanded_x [{rows}, {args.hidden}] never allocated: {saved} bytes ({saved / 1024:.1f} KiB) that a "
          f"non-fused backward would hold at once")
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())

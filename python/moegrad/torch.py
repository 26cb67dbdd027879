"""PyTorch autograd layer of moegrad.

    y, expanded_row_idx, group_list = moegrad.torch.moe_experts(x, expert_idx, weight)

forward:  moe_init_routing + grouped_matmul;
backward: the fused grad-x (d_expanded_x is never materialised) and
          grouped_matmul_weight_grad, each bitwise reproducible.

x [batch, K] and weight [G, K, N] share one dtype (float32, float16 or
bfloat16; CPU tensors); expert_idx is [batch, top_k] int32/int64. y is
[batch*top_k, N] in expanded order (rows grouped by expert, stably by original
position p = b*top_k + j), expanded_row_idx (int64) maps each row to its p,
group_list (int64) counts rows per expert.
"""

import math

import torch

import moegrad as _mg

__all__ = ["moe_experts", "moe_combine", "MoEExperts"]


class _MoEExpertsFunction(torch.autograd.Function):
    """autograd.Function behind moe_experts(), which alone may apply it: it
    passes x_anchor (without which a second derivative through grad_weight
    would come out silently missing) and applies autocast."""

    @staticmethod
    def forward(ctx, x, expert_idx, weight, context=None, active_num=None, capacity=None, x_anchor=None):
        expanded_x, row_idx, group_list = _mg.moe_init_routing(x, expert_idx, weight.shape[0], active_num=active_num,
                                                               capacity=capacity, context=context)
        y = _mg.grouped_matmul(expanded_x, weight, group_list, context=context)
        # expanded_x (top_k times x's size) only where grad_weight will read it.
        ctx.save_for_backward(expanded_x if ctx.needs_input_grad[2] else None, row_idx, group_list, weight)
        # Not x itself: nothing reads its values after the forward (grad_weight
        # reads the routed copy), and holding it would keep a [batch, K]
        # activation alive as long as the graph, after backward too. What
        # grad_weight depends on x through is x_anchor (see moe_experts).
        ctx.x_anchor = x_anchor
        ctx.batch, ctx.top_k = int(expert_idx.shape[0]), int(expert_idx.shape[1])
        ctx.x_dtype = x.dtype
        ctx.context = context
        ctx.mark_non_differentiable(row_idx, group_list)
        return y, row_idx, group_list

    @staticmethod
    def backward(ctx, grad_y, _grad_row_idx, _grad_group_list):
        expanded_x, row_idx, group_list, weight = ctx.saved_tensors
        grad_x = grad_weight = None
        with torch.no_grad():
            gy = grad_y.to(weight.dtype)  # a no-op unless autocast/mixed use changed it
            if ctx.needs_input_grad[0]:
                grad_x = _mg.grad_x(gy, weight, row_idx, group_list, ctx.batch, ctx.top_k, context=ctx.context)
                grad_x = grad_x.to(ctx.x_dtype)
            if ctx.needs_input_grad[2]:
                grad_weight = _mg.grouped_matmul_weight_grad(expanded_x, gy, group_list, out_dtype=weight.dtype,
                                                             context=ctx.context)
        if torch.is_grad_enabled():  # backward(create_graph=True): a graph through these is wanted
            grad_x = _first_order_only(grad_x, grad_y, weight)  # grad_x is linear in grad_y and weight,
            grad_weight = _first_order_only(grad_weight, grad_y, ctx.x_anchor)  # grad_weight in grad_y and x
        return grad_x, None, grad_weight, None, None, None, None


class _FirstOrderOnly(torch.autograd.Function):
    """A gradient moe_experts computed, tied to what it depends on, whose
    own backward raises: differentiating through moe_experts' backward is
    not supported, and without this tie a second-order gradient would come
    out silently missing (torch's once_differentiable checks only the
    incoming gradients, not the saved weight or input)."""

    @staticmethod
    def forward(ctx, grad, *_depends_on):
        # Not a view (view_as): a custom Function's view output may not be
        # changed in place, and callers clip or scale gradients in place.
        return grad.detach()

    @staticmethod
    def backward(ctx, *_grads):
        raise RuntimeError("moegrad.torch.moe_experts has no second derivative: a loss built from the gradients "
                           "it returned (backward or autograd.grad with create_graph=True) cannot be "
                           "differentiated again")


def _first_order_only(grad, *depends_on):
    depends_on = [t for t in depends_on if t is not None and t.requires_grad]
    if grad is None or not depends_on:
        return grad
    return _FirstOrderOnly.apply(grad, *depends_on)


def moe_experts(x, expert_idx, weight, context=None, *, active_num=None, capacity=None):
    """The expert layer: returns (y, expanded_row_idx, group_list); gradients
    flow to x and weight in their dtypes. context: a moegrad.Context (threads,
    ISA; fast_bf16=True runs all three bf16 GEMMs, forward, grad_x and
    grad_weight, in the fast bf16 mode's pair order, and on a CPU without
    AVX512_BF16 refuses bf16 from the forward on) or None for the package
    default. capacity / active_num drop slots as
    moegrad.moe_init_routing does (y then has fewer rows; a dropped slot
    contributes nothing and gets no gradient). Under torch.autocast("cpu")
    the layer is a matmul as torch's are: x and weight are cast to the
    autocast dtype first (differentiably, so their gradients come back in
    their own dtypes)."""
    for name, t in (("x", x), ("weight", weight)):
        if not torch.is_tensor(t):
            raise TypeError(f"moe_experts: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not torch.is_tensor(expert_idx):  # a numpy array or nested lists: its shape is read below
        expert_idx = torch.as_tensor(expert_idx)
    anchor = _anchor(x)
    x, weight = _autocast(x), _autocast(weight)
    return _MoEExpertsFunction.apply(x, expert_idx, weight, context, active_num, capacity, anchor)


# What torch's CPU autocast casts for a matmul: the floating types it may
# lower (float64 stays, and is refused by the library with its own message).
_AUTOCAST_FROM = (torch.float32, torch.float16, torch.bfloat16)


def _autocast(t):
    if not (torch.is_tensor(t) and torch.is_autocast_cpu_enabled() and t.dtype in _AUTOCAST_FROM):
        return t
    return t.to(torch.get_autocast_cpu_dtype())


def _anchor(x):
    """A scalar whose graph leads back to x without holding x's memory (an
    empty slice, summed: neither node keeps its input), or None where no
    graph would: what a gradient computed from x's values under
    create_graph is tied to, so that differentiating it again raises."""
    if not (torch.is_tensor(x) and x.requires_grad and x.dim() > 0 and torch.is_grad_enabled()):
        return None
    return x[:0].sum()


def moe_combine(y, expanded_row_idx, batch, top_k, routing_weights=None):
    """Pure-PyTorch un-permute: out[b] = sum_j w[b, j] * y[row of (b, j)], with
    expanded_row_idx from moe_experts (expanded -> original). routing_weights:
    [batch, top_k] or None (all ones). Differentiable in y and the weights.
    The index may be int32 (moe_init_routing's index_dtype="int32"): torch
    indexes with int64 only."""
    expanded_row_idx = expanded_row_idx.long()
    token = expanded_row_idx // top_k
    rows = y
    if routing_weights is not None:
        rows = y * routing_weights.reshape(-1)[expanded_row_idx].unsqueeze(1).to(y.dtype)
    out = torch.zeros(batch, y.shape[1], dtype=y.dtype, device=y.device)
    return out.index_add(0, token, rows)


class MoEExperts(torch.nn.Module):
    """G experts, each a bias-free Linear(in_features, out_features), applied
    to the tokens routed to them: forward(x, expert_idx, *, active_num=None,
    capacity=None) -> (y, expanded_row_idx, group_list) as moe_experts.
    weight is [G, in, out], initialised like nn.Linear (uniform in
    +-1/sqrt(in_features))."""

    def __init__(self, num_experts, in_features, out_features, dtype=torch.float32, context=None, device=None):
        super().__init__()
        self.num_experts, self.in_features, self.out_features = num_experts, in_features, out_features
        self.context = context
        # device as torch's modules take it (a "meta" module for deferred
        # initialisation, say); forward computes on CPU tensors only.
        self.weight = torch.nn.Parameter(
            torch.empty(num_experts, in_features, out_features, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x, expert_idx, *, active_num=None, capacity=None):
        return moe_experts(x, expert_idx, self.weight, self.context, active_num=active_num, capacity=capacity)

    def extra_repr(self):
        return (f"num_experts={self.num_experts}, in_features={self.in_features}, "
                f"out_features={self.out_features}, dtype={self.weight.dtype}")

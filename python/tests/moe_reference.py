"""Pure-PyTorch float64 references for the moegrad operators, written from
their definitions (no moegrad code), plus the error bound checks."""

import torch


def routing(expert_idx, num_experts, active_num=None, capacity=None):
    """(pos, counts): original positions p = b*top_k + j of the kept expanded
    rows in order (stable sort by expert; each expert keeps its first
    `capacity` slots; then the first `active_num` rows), and rows per expert."""
    flat = torch.as_tensor(expert_idx).reshape(-1).long()
    order = torch.sort(flat, stable=True).indices.tolist()
    seen = [0] * num_experts
    kept = []
    for p in order:
        g = int(flat[p])
        seen[g] += 1
        if capacity is not None and seen[g] > capacity:
            continue
        if active_num is not None and len(kept) >= active_num:
            break
        kept.append(p)
    pos = torch.tensor(kept, dtype=torch.int64)
    counts = torch.bincount(flat[pos], minlength=num_experts) if kept else torch.zeros(num_experts, dtype=torch.int64)
    return pos, counts


def starts(counts):
    c = torch.as_tensor(counts).long()
    return torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(c, 0)]).tolist()


def grouped_matmul(x, weight, counts):
    """y[i] = x[i] @ weight[g(i)] in float64."""
    x, weight = torch.as_tensor(x).double(), torch.as_tensor(weight).double()
    s = starts(counts)
    y = torch.zeros(x.shape[0], weight.shape[2], dtype=torch.float64)
    for g in range(weight.shape[0]):
        y[s[g]:s[g + 1]] = x[s[g]:s[g + 1]] @ weight[g]
    return y


def weight_grad(x, grad_y, counts):
    """d_weight[g] = x_g^T @ grad_y_g in float64 (zeros for empty experts)."""
    x, grad_y = torch.as_tensor(x).double(), torch.as_tensor(grad_y).double()
    s = starts(counts)
    out = torch.zeros(len(s) - 1, x.shape[1], grad_y.shape[1], dtype=torch.float64)
    for g in range(len(s) - 1):
        out[g] = x[s[g]:s[g + 1]].T @ grad_y[s[g]:s[g + 1]]
    return out


def scatter_add(d, owner, batch):
    """grad_x[b] = sum of the rows i with owner[i] == b (owner -1: none)."""
    d = torch.as_tensor(d).double()
    owner = torch.as_tensor(owner).long()
    keep = owner >= 0
    out = torch.zeros(batch, d.shape[1], dtype=torch.float64)
    return out.index_add_(0, owner[keep], d[keep])


def grad_x(grad_y, weight, pos, counts, batch, top_k):
    """The input gradient through the routing: d_expanded_x = grad_y @ W^T per
    expert, scattered back to tokens pos // top_k."""
    d = grouped_matmul(grad_y, torch.as_tensor(weight).double().transpose(1, 2), counts)
    return scatter_add(d, torch.as_tensor(pos).long() // top_k, batch)


HALF_ULP = {torch.float32: 0.0, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def assert_within(got, ref, abs_ref, terms, out_dtype=torch.float32, what=""):
    """|got - ref| <= terms * 2^-24 * abs_ref + half-ulp(out_dtype) * |ref|:
    fp32 accumulation of `terms` terms, then (for f16/bf16) one rounding."""
    got = torch.as_tensor(got).double()
    tol = terms * 2.0 ** -24 * abs_ref + HALF_ULP[out_dtype] * ref.abs()
    err = (got - ref).abs()
    bad = ~(err <= tol)  # a NaN in got (an unwritten or broken element) fails too
    assert not bool(bad.any()), (
        f"{what}: {int(bad.sum())} elements outside the bound; worst excess "
        f"{float((err - tol).max()):.3g} at {tuple(int(i) for i in (bad.nonzero()[0]))}")


TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def random_experts(batch, top_k, num_experts, empty=()):
    """[batch, top_k] int64 expert choices, distinct per token, avoiding `empty`."""
    allowed = torch.tensor([g for g in range(num_experts) if g not in empty])
    return torch.stack([allowed[torch.randperm(len(allowed))[:top_k]] for _ in range(batch)])

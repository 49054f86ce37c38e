#!/usr/bin/python3
"""moe_reference.py DIR E K F SWIGLU BIAS CAPACITY COEFF RENORMALISE: PyTorch's mixture-of-experts block against dtrain's.

DIR holds what tests/e2e/moe_block wrote: the inputs (x, dy, router_w, expert_*), dtrain's forward output
(out), its gradients (dx, grad_*) and its load-balancing loss (aux), raw float32. This script recomputes
them in float64 from the definitions, written independently of dtrain's code:
  p = softmax(x Wr^T); the K largest of p per token (a stable sort, ties to the lower expert) weigh the
  experts' outputs, not renormalised (with RENORMALISE 1 divided by their sum, as Mixtral's
  routing_weights /= routing_weights.sum(dim=-1, keepdim=True) and Qwen3-MoE's norm_topk_prob do); with CAPACITY f > 0 expert e keeps its ceil(f N K / E) most probable
  assignments (ties: the earlier token), the others contribute 0; every expert is evaluated on every token
  (dense, no gathering) as fc -> GELU(tanh) or SwiGLU -> fcproj;
  aux = COEFF E / (N^2 K) sum_e (sum_t p_te) count_e, count_e = the top-K choices of e before dropping
  (not differentiated); J = sum(dy * out) + aux, gradients by autograd.
Tolerance: dtrain computes in float32 (u = 2^-24) with sums over at most n = 48 terms, each within
n u = 2.9e-6 of its terms' magnitudes, and a tensor's terms (inputs of unit scale, products through
the expert's two layers) sum to at most ~3 times its largest value: 8.6e-6; every tensor must agree
within 1e-5 of its largest magnitude (a wrong routing weight, a lost drop or a missing term of the
router's gradient is 1e-2 or worse). With CAPACITY > 0 the script also checks that assignments were dropped.
"""
import math
import sys

import numpy as np
import torch

N, C = 24, 16


def load(d, name, shape):
    return torch.from_numpy(np.fromfile(f"{d}/{name}.f32", dtype=np.float32).astype(np.float64).reshape(shape))


def main():
    d = sys.argv[1]
    E, K, F, swiglu, bias = (int(v) for v in sys.argv[2:7])
    capacity, coeff = float(sys.argv[7]), float(sys.argv[8])
    renormalise = len(sys.argv) > 9 and sys.argv[9] == "1"
    H = 2 * F if swiglu else F
    x = load(d, "x", (N, C)).requires_grad_()
    dy = load(d, "dy", (N, C))
    w = {"router_w": load(d, "router_w", (E, C)), "expert_fc_w": load(d, "expert_fc_w", (E, H, C)),
         "expert_fcproj_w": load(d, "expert_fcproj_w", (E, C, F))}
    if bias:
        w["expert_fc_b"] = load(d, "expert_fc_b", (E, H))
        w["expert_fcproj_b"] = load(d, "expert_fcproj_b", (E, C))
    for t in w.values():
        t.requires_grad_()

    p = torch.softmax(x @ w["router_w"].T, dim=1)                          # (N,E)
    order = torch.from_numpy(np.argsort(-p.detach().numpy(), axis=1, kind="stable"))[:, :K]  # (N,K)
    weight = torch.gather(p, 1, order)                                     # (N,K)
    if renormalise:
        weight = weight / weight.sum(dim=1, keepdim=True)
    keep = torch.ones(N, K, dtype=torch.bool)
    dropped = 0
    if capacity > 0:
        cap = math.ceil(capacity * N * K / E)
        for e in range(E):
            chosen = [(t, j) for t in range(N) for j in range(K) if order[t, j] == e]
            ranked = sorted(chosen, key=lambda a: (-float(p[a[0], e]), a[0]))
            for t, j in ranked[cap:]:
                keep[t, j] = False
                dropped += 1
    outs = []
    for e in range(E):                                                     # every expert on every token
        h = x @ w["expert_fc_w"][e].T + (w["expert_fc_b"][e] if bias else 0)
        a = torch.nn.functional.silu(h[:, :F]) * h[:, F:] if swiglu else torch.nn.functional.gelu(h, approximate="tanh")
        outs.append(a @ w["expert_fcproj_w"][e].T + (w["expert_fcproj_b"][e] if bias else 0))
    y = torch.stack(outs, dim=1)                                           # (N,E,C)
    picked = torch.gather(y, 1, order.unsqueeze(-1).expand(N, K, C))       # (N,K,C)
    out = (picked * (weight * keep).unsqueeze(-1)).sum(dim=1)
    counts = torch.zeros(E, dtype=torch.float64)
    for e in range(E):
        counts[e] = float((order == e).sum())
    aux = coeff * E / (N * N * K) * (p.sum(dim=0) * counts).sum()
    ((dy * out).sum() + aux).backward()

    checks = [("out", out.detach(), load(d, "out", (N, C))), ("dx", x.grad, load(d, "dx", (N, C))),
              ("aux", aux.detach().reshape(1), load(d, "aux", (1,)))]
    for name, t in w.items():
        checks.append(("grad_" + name, t.grad, load(d, "grad_" + name, t.shape)))
    ok = True
    for name, ref, got in checks:
        scale = max(float(ref.abs().max()), 1e-12)
        err = float((ref - got).abs().max()) / scale
        print(f"{name:24s} max |dtrain - torch| / max |torch| = {err:.2e}")
        ok = ok and err <= 1e-5
    if capacity > 0:
        print(f"dropped {dropped} of {N * K} assignments")
        ok = ok and dropped > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch_attention.py: PyTorch's flash attention (F.scaled_dot_product_attention, causal, bf16, the
flash backend only) on the shapes of attention_kernels (tools/bench/attention_kernels.cpp), timed the
same way: each call waited for, min and median of the repeats after a warm-up call, FLOPs by
flash-attention's convention (forward 4 B NH T^2 HD / 2, backward 2.5 times that). With --dtrain, the
JSON attention_kernels wrote is read too and the result holds both and dtrain's time over PyTorch's.

  torch_attention.py --out FILE.json [--dtrain ATTENTION_KERNELS.json] [--repeats 20]

Grouped-query shapes: the flash backend takes as many key/value heads as query heads, so K and V are
repeated to NH heads before the timed calls (PyTorch users do the same, or pass enable_gqa to the math
backend); the kernel time is that of NH heads, as dtrain's kernels also read K and V once per query head.
Exit 77 without a GPU.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [  # name, B, T, NH, NKV, HD: the same as attention_kernels
    ("gpt2-mb16-T1024", 16, 1024, 12, 12, 64),
    ("gpt2-mb4-T4096", 4, 4096, 12, 12, 64),
    ("llama-gqa-T2048-hd128", 2, 2048, 32, 8, 128),
]


def time_ms(repeats, f):
    f()
    torch.cuda.synchronize()
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtrain", help="attention_kernels' JSON, for the ratios")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_attention: no GPU visible; nothing to time")
        return 77
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = torch.Generator(device="cuda").manual_seed(1234)
    rows = []
    print("%-24s %10s %10s %9s %10s %10s %9s" % ("torch flash (bf16)", "fwd ms min", "median", "TFLOP/s", "bwd ms min", "median", "TFLOP/s"))
    for name, B, T, NH, NKV, HD in SHAPES:
        q, k, v = (torch.randn(B, NH if i == 0 else NKV, T, HD, device="cuda", dtype=torch.bfloat16, generator=g) for i in range(3))
        k, v = (x.repeat_interleave(NH // NKV, dim=1).requires_grad_() for x in (k, v))
        q.requires_grad_()
        dout = torch.randn(B, NH, T, HD, device="cuda", dtype=torch.bfloat16, generator=g)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            fwd = time_ms(a.repeats, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            bwd = time_ms(a.repeats, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        flops = 4.0 * B * NH * T * T * HD / 2
        r = {"name": name, "B": B, "T": T, "NH": NH, "NKV": NKV, "HD": HD,
             "forward_ms_min": min(fwd), "forward_ms_median": statistics.median(fwd), "forward_tflops": flops / min(fwd) / 1e9,
             "backward_ms_min": min(bwd), "backward_ms_median": statistics.median(bwd), "backward_tflops": 2.5 * flops / min(bwd) / 1e9}
        rows.append(r)
        print("%-24s %10.3f %10.3f %9.1f %10.3f %10.3f %9.1f" % (name, r["forward_ms_min"], r["forward_ms_median"], r["forward_tflops"],
                                                                 r["backward_ms_min"], r["backward_ms_median"], r["backward_tflops"]))
    result = {"torch": torch.__version__, "repeats": a.repeats, "torch_shapes": rows}
    if a.dtrain:
        mine = {s["name"]: s for s in json.load(open(a.dtrain))["shapes"]}
        result["dtrain_shapes"] = list(mine.values())
        result["dtrain_over_torch_time"] = {}
        for r in rows:
            if r["name"] in mine:
                d = mine[r["name"]]
                ratio = {p: d[p + "_ms_min"] / r[p + "_ms_min"] for p in ("forward", "backward")}
                result["dtrain_over_torch_time"][r["name"]] = ratio
                print("%-24s dtrain time / torch: forward %.2f, backward %.2f" % (r["name"], ratio["forward"], ratio["backward"]))
    json.dump(result, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

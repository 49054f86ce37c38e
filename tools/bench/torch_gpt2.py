#!/usr/bin/env python3
"""torch_gpt2.py: the PyTorch baseline dtrain's GPU speed is compared with (GPT-2, or --arch llama).

GPT-2 as dtrain trains it (inputs/gpt2-small-1gpu.ini: pre-LayerNorm blocks, biases, GELU (tanh),
tied embedding and output weights, learned positions, vocabulary 50304), written as a PyTorch user would
write it at their best: bf16 autocast over fp32 weights, F.scaled_dot_product_attention (flash
attention on Hopper), fused AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices), gradient
clipping at 1.0, then the same model under torch.compile (compile time reported apart). Eager first,
so that a compile failure still leaves a number. One optimizer step per micro-batch, as dtrain runs
with global_batch_size = micro_batch_size.

With --arch llama, the Llama 3.2 1B architecture of inputs/llama3-1b-1gpu.ini instead (16 layers,
d=2048, 32 query heads on 8 key/value groups, RMSNorm, RoPE base 500000 (Hugging Face's rotate-half
pairs), SwiGLU width 8192, no biases, tied output weights, vocabulary 128256, T=2048), grouped-query
attention through SDPA with the key/value heads repeated, the same optimizer.

  torch_gpt2.py --out FILE.json [--arch gpt2|llama] [--micro-batches 8,16,32] [--steps 13] [--warmup 3]
                [--no-compile] [--device cuda|cpu] [--tiny]

--tiny: a 2-layer, 64-wide, T=64 model (Llama: 4 heads on 2 groups, SwiGLU width 128, vocabulary 256) (for CI on a CPU with an old PyTorch): the script runs end to end
and says which features it had to do without (no SDPA before PyTorch 2.0, no torch.compile, no fused
AdamW). Each measured configuration is one JSON object in "runs": impl (eager/compiled), micro_batch,
seq_length, steps, step_ms_median/min/max, tokens_per_s_median/min, mfu_vs_peak (the datasheet peak
given by --peak-tflops, default H100 SXM bf16 dense 989), peak_memory_bytes
(torch.cuda.max_memory_allocated), compile_s, loss_first/last. The step time is measured with CUDA
events around each whole step (forward, backward, clipping, optimizer) after the warm-up steps.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def has_sdpa():
    return hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # (B, T, C) -> (B, heads, T, head_dim)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if has_sdpa():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0: the textbook attention with a causal mask
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = s.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, c, heads, t, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output weights
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def rms_norm(x, weight, eps):
    return weight * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x, cos, sin):  # Hugging Face's RoPE: the pairs (i, i + d/2) of each head
    half = x.size(-1) // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, c, heads, groups, ffn):
        super().__init__()
        self.heads, self.groups, self.hd = heads, groups, c // heads
        self.ln_1 = nn.Parameter(torch.ones(c))
        self.qkv = nn.Linear(c, (heads + 2 * groups) * self.hd, bias=False)
        self.proj = nn.Linear(c, c, bias=False)
        self.ln_2 = nn.Parameter(torch.ones(c))
        self.gate_up = nn.Linear(c, 2 * ffn, bias=False)
        self.down_proj = nn.Linear(ffn, c, bias=False)

    def attention(self, x, cos, sin):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split([self.heads * self.hd, self.groups * self.hd, self.groups * self.hd], dim=2)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = (z.view(b, t, self.groups, self.hd).transpose(1, 2) for z in (k, v))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = (z.repeat_interleave(self.heads // self.groups, dim=1) for z in (k, v))
        if has_sdpa():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = s.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x, cos, sin):
        x = x + self.attention(rms_norm(x, self.ln_1, 1e-5), cos, sin)
        gate, up = self.gate_up(rms_norm(x, self.ln_2, 1e-5)).chunk(2, dim=-1)
        return x + self.down_proj(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, layers, c, heads, groups, ffn, t, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.blocks = nn.ModuleList(LlamaBlock(c, heads, groups, ffn) for _ in range(layers))
        self.ln_f = nn.Parameter(torch.ones(c))
        hd = c // heads
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(t).float(), inv)
        self.register_buffer("cos", torch.cat((angles, angles), dim=-1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((angles, angles), dim=-1).sin(), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        logits = F.linear(rms_norm(x, self.ln_f, 1e-5), self.wte.weight)  # tied output weights
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


# The two architectures: shape (layers, hidden, heads, key/value groups, MLP width, seq_length, vocab),
# full and --tiny.
SHAPES = {"gpt2": ((12, 768, 12, 12, 3072, 1024, 50304), (2, 64, 4, 4, 256, 64, 50304)),
          "llama": ((16, 2048, 32, 8, 8192, 2048, 128256), (2, 64, 4, 2, 128, 64, 256))}


def make_model(arch, shape):
    layers, c, heads, groups, ffn, t, vocab = shape
    return GPT(layers, c, heads, t, vocab) if arch == "gpt2" else Llama(layers, c, heads, groups, ffn, t, vocab)


def flops_per_token(arch, shape):
    # dtrain's convention (src/plan/model_flops.cpp): 6 x the matrix parameters a token meets (the
    # output layer included) + 6 L T C for causal attention (half of 12 L T C).
    layers, c, heads, groups, ffn, t, vocab = shape
    hd = c // heads
    per_layer = 12 * c * c if arch == "gpt2" else c * (heads + 2 * groups) * hd + c * c + 3 * c * ffn
    return 6.0 * (layers * per_layer + vocab * c) + 6.0 * layers * t * c


def make_optimizer(model, device, notes):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))
    except (TypeError, RuntimeError) as e:  # PyTorch without fused AdamW
        notes.append("fused AdamW unavailable (%s): foreach AdamW" % str(e).splitlines()[0])
        return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)


def run(args, shape, micro_batch, compiled, notes):
    t, vocab = shape[5], shape[6]
    device = args.device
    torch.manual_seed(1234)
    model = make_model(args.arch, shape).to(device)
    opt = make_optimizer(model, device, notes)
    step_model = model
    compile_s = None
    if compiled:
        step_model = torch.compile(model)
    use_bf16 = device == "cuda" or args.tiny
    gen = torch.Generator(device="cpu").manual_seed(7)
    batches = [torch.randint(0, 256 if args.tiny else vocab, (micro_batch, t + 1), generator=gen).to(device) for _ in range(4)]

    def step(i):
        data = batches[i % len(batches)]
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=use_bf16):
            loss = step_model(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    losses = [step(0).item()]  # the first step compiles, when compiled
    if compiled:
        compile_s = time.time() - t0
    for i in range(1, args.warmup):
        losses.append(step(i).item())
    times = []
    for i in range(args.steps):
        if device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step(args.warmup + i)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)
        else:
            s = time.perf_counter()
            loss = step(args.warmup + i)
            times.append(time.perf_counter() - s)
        losses.append(loss.item())
    tokens = micro_batch * t
    med = statistics.median(times)
    fpt = flops_per_token(args.arch, shape)
    return {
        "impl": "compiled" if compiled else "eager",
        "micro_batch": micro_batch,
        "seq_length": t,
        "steps": len(times),
        "step_ms_median": 1e3 * med,
        "step_ms_min": 1e3 * min(times),
        "step_ms_max": 1e3 * max(times),
        "tokens_per_s_median": tokens / med,
        "tokens_per_s_max": tokens / min(times),
        "flops_per_token": fpt,
        "mfu_vs_peak": tokens / med * fpt / (args.peak_tflops * 1e12),
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else None,
        "compile_s": compile_s,
        "loss_first": losses[0],
        "loss_last": losses[-1],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--arch", default="gpt2", choices=sorted(SHAPES), help="the model: GPT-2 124M or the Llama 3.2 1B architecture")
    ap.add_argument("--micro-batches", default="8,16,32", help="comma-separated micro-batch sizes")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per configuration")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (the first compiles)")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--compile-micro-batches", default=None, help="micro-batches to compile (default: all)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="2 layers, C=64, T=64 (CI smoke test)")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="the peak MFU is quoted against (default H100 SXM bf16 dense)")
    args = ap.parse_args()
    if args.warmup < 1 or args.steps < 1:
        ap.error("--warmup and --steps must be at least 1")
    try:
        mbs = [int(x) for x in args.micro_batches.split(",")]
        compile_mbs = mbs if args.compile_micro_batches is None else [int(x) for x in args.compile_micro_batches.split(",")]
    except ValueError:
        ap.error("--micro-batches takes whole numbers separated by commas, e.g. 8,16,32")
    shape = SHAPES[args.arch][1 if args.tiny else 0]
    notes = []
    if not has_sdpa():
        notes.append("PyTorch %s has no scaled_dot_product_attention: masked softmax attention" % torch.__version__)
    can_compile = hasattr(torch, "compile") and not args.no_compile
    if not hasattr(torch, "compile"):
        notes.append("PyTorch %s has no torch.compile: eager only" % torch.__version__)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
              "model": dict(arch=args.arch, **dict(zip(("layers", "hidden", "heads", "groups", "ffn", "seq_length", "vocab"), shape))),
              "peak_tflops": args.peak_tflops, "runs": [], "failures": [], "notes": notes}

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    plan = [(mb, False) for mb in mbs] + ([(mb, True) for mb in compile_mbs] if can_compile else [])
    for mb, compiled in plan:
        label = "%s micro-batch %d" % ("compiled" if compiled else "eager", mb)
        try:
            r = run(args, shape, mb, compiled, notes)
            result["runs"].append(r)
            print("torch %s: %.1f ms/step median (min %.1f), %.0f tokens/s, MFU %.1f%% of %.0f TFLOP/s, peak memory %s%s" % (
                label, r["step_ms_median"], r["step_ms_min"], r["tokens_per_s_median"], 100 * r["mfu_vs_peak"], args.peak_tflops,
                "%.2f GiB" % (r["peak_memory_bytes"] / 2**30) if r["peak_memory_bytes"] else "n/a",
                ", compiled in %.1f s" % r["compile_s"] if r["compile_s"] else ""), flush=True)
        except Exception as e:  # out of memory at a large batch, a compile failure: noted, the rest still runs
            result["failures"].append({"run": label, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")})
            print("torch %s failed: %s" % (label, result["failures"][-1]["error"]), flush=True)
        finally:
            if args.device == "cuda":
                torch.cuda.empty_cache()
        save()
    for n in dict.fromkeys(notes):
        print("note:", n)
    save()
    return 0 if result["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())

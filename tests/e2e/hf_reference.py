#!/usr/bin/python3
"""Hugging Face directories that dtrain exported, checked without dtrain's code:

  hf_reference.py logits DIR DTRAIN_LOGITS.f32 ID...
      reads DIR (config.json, model.safetensors or the shards of model.safetensors.index.json) with json
      and numpy alone (the safetensors layout: 8-byte little-endian header length, JSON header, raw
      little-endian tensors), runs the model's forward pass as transformers publishes it (GPT2LMHeadModel:
      modeling_gpt2.py; LlamaForCausalLM: modeling_llama.py) in PyTorch, float64, on the ids, and compares
      its logits with dtrain's (float32 rows, one per id). Tolerance 1e-5 of the largest |logit|: dtrain
      computes in fp32 (u = 2^-24 per rounding), the reference in fp64. A logit's path through the
      test models (4 layers, hidden 64, MLP <= 256, T <= 32) adds up about n = 4 x (3 x 64 + 32 + 256)
      + 64 = 1984 roundings of terms no larger than the logits; with the inputs' random signs they add
      as a random walk, sqrt(n) u = 2.7e-6, and 4 of those (1.1e-5) is the tolerance. A wrong layout (a
      missing transpose, swapped q/k, a wrong RoPE pairing) is 1e-1 or more.

  hf_reference.py write ARCH DIR
      writes a random model of ARCH (gpt2: as the original gpt2 upload, names without "transformer.",
      causal-mask buffers h.<l>.attn.bias, F16; llama: GQA 4 heads on 2 groups, tied, BF16, in two shards
      with an index, tensors in shuffled order; llama31: the same with Llama 3.1's rope_scaling) with this file's own safetensors writer, for the import
      to read what another tool wrote

  hf_reference.py packed-batch OUT.bin VOCAB T EOD [LONGEST]
      writes one sample of T tokens for dtrain's model_grads with documents packed in it (lengths 5, 1,
      then random ones below LONGEST, default 7; the end-of-document token EOD ends each) and a fine-tuning loss mask: as Megatron's
      get_ltor_masks_and_position_ids computes them (positions reset after each EOD, a block-diagonal
      causal attention mask, no loss where the input is EOD), the mask's answers random.

  hf_reference.py packed DIR GRADS_DIR BATCH.bin DTRAIN_LOSS
      the model of DIR in float64 on that sample, with the explicit (T, T) block-diagonal mask and the
      position ids: the loss (the mean over the counted targets) and, by autograd, every tensor's
      gradient, against dtrain's loss and the gradients it exported to GRADS_DIR (Hugging Face names).
      Tolerance 4e-5 of each tensor's largest |gradient| and 1e-6 relative on the loss (see packed()).

  hf_reference.py damage KIND SRC DST
      copies the Hugging Face directory SRC to DST with one defect (missing_tensor, wrong_shape,
      extra_tensor, truncated, bad_header, no_config, index_missing_tensor, rope_parameters (a YaRN-scaled
      RoPE as transformers 5 writes it), huge_model) and prints the tensor or key it touched, for the
      import's error tests.
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np


class _TorchOnFirstUse:
    """torch, imported where first used: `damage` and `write`'s file writing need only numpy, and the
    import costs about 1.3 s of CPU in each of the suite's many runs of this script."""

    def __getattr__(self, name):
        import torch as module
        globals()["torch"] = module
        return getattr(module, name)


torch = _TorchOnFirstUse()

DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return n, header


def read_safetensors(path):
    n, header = read_header(path)
    data = open(path, "rb").read()[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype, size = DTYPES[info["dtype"]]
        raw = np.frombuffer(data[begin:end], dtype=dtype)
        if info["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(raw.astype(np.float64).reshape(info["shape"]))
    return out


def read_model_dir(d):
    config = json.load(open(os.path.join(d, "config.json")))
    index = os.path.join(d, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
        for f in files:
            tensors.update(read_safetensors(os.path.join(d, f)))
    else:
        tensors = read_safetensors(os.path.join(d, "model.safetensors"))
    return config, tensors


def causal_attention(q, k, v, hidden=None):  # (H, T, D) each; hidden: (T, T) True where a query must not see a key
    T, D = q.shape[1], q.shape[2]
    scores = q @ k.transpose(1, 2) / math.sqrt(D)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if hidden is None else hidden
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sliding_window_hidden(T, c):
    """MistralForCausalLM's mask from config.json's sliding_window (MistralConfig's default 4096 when absent,
    none when null): query q sees key k when k <= q and k > q - sliding_window (transformers' sliding
    window mask); None (plain causal) for other families."""
    if c.get("model_type") != "mistral":
        return None
    W = c.get("sliding_window", 4096)
    if W is None:
        return None
    q, k = torch.arange(T).view(T, 1), torch.arange(T).view(1, T)
    return ~((k <= q) & (k > q - W))


def gpt2_forward(c, w, ids, positions=None, hidden=None):
    """GPT2LMHeadModel: Conv1D layers compute x @ W + b with W stored (in, out)."""
    T = len(ids)
    C, H = c["n_embd"], c["n_head"]
    eps = c["layer_norm_epsilon"]
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], eps)
    gelu_new = lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(T) if positions is None else positions]
    for l in range(c["n_layer"]):
        p = "transformer.h.%d." % l
        qkv = ln(h, p + "ln_1") @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (x.view(T, H, C // H).transpose(0, 1) for x in qkv.split(C, dim=1))
        y = causal_attention(q, k, v, hidden).transpose(0, 1).reshape(T, C)
        h = h + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = gelu_new(ln(h, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = ln(h, "transformer.ln_f")
    head = w["transformer.wte.weight"] if c.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return h @ head.T


def llama_forward(c, w, ids, positions=None, hidden=None):
    """LlamaForCausalLM: RMSNorm, rotate_half RoPE on q_proj/k_proj outputs, repeat_kv, SwiGLU; Qwen3ForCausalLM
    also normalises each head's queries and keys (q_norm, k_norm) before RoPE."""
    T = len(ids)
    C, H = c["hidden_size"], c["num_attention_heads"]
    G = c.get("num_key_value_heads", H)
    D = c.get("head_dim", C // H)
    eps = c["rms_norm_eps"]
    bias = c.get("attention_bias", False)

    def rms(x, p):
        return w[p + ".weight"] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x, p):
        y = x @ w[p + ".weight"].T
        return y + w[p + ".bias"] if (p + ".bias") in w else y

    inv_freq = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    scaling = c.get("rope_scaling") or {}
    if scaling.get("rope_type") == "llama3":
        inv_freq = torch.tensor(llama3_scaling(inv_freq.tolist(), scaling), dtype=torch.float64)
    freqs = torch.outer(torch.arange(T, dtype=torch.float64) if positions is None else positions.to(torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    h = w["model.embed_tokens.weight"][ids]
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        x = rms(h, p + "input_layernorm")
        q = linear(x, p + "self_attn.q_proj").view(T, H, D)
        k = linear(x, p + "self_attn.k_proj").view(T, G, D)
        if c.get("model_type") in ("qwen3", "qwen3_moe"):  # modeling_qwen3(_moe).py: RMSNorm over each head's D values, before RoPE
            q, k = rms(q, p + "self_attn.q_norm"), rms(k, p + "self_attn.k_norm")
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        v = linear(x, p + "self_attn.v_proj").view(T, G, D).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // G, dim=0), v.repeat_interleave(H // G, dim=0)
        y = causal_attention(q, k, v, hidden).transpose(0, 1).reshape(T, H * D)
        h = h + linear(y, p + "self_attn.o_proj")
        x = rms(h, p + "post_attention_layernorm")
        if p + "block_sparse_moe.gate.weight" in w:  # modeling_mixtral.py's sparse MoE block
            h = h + sparse_moe(w, x, p + "block_sparse_moe.", c["num_local_experts"], c["num_experts_per_tok"], True, ("w1", "w3", "w2"))
        elif c.get("model_type") == "qwen3_moe" and l not in (c.get("mlp_only_layers") or []) and \
                (l + 1) % c.get("decoder_sparse_step", 1) == 0:  # modeling_qwen3_moe.py's sparse layers, its rule
            h = h + sparse_moe(w, x, p + "mlp.", c["num_experts"], c["num_experts_per_tok"], c.get("norm_topk_prob", False),
                               ("gate_proj", "up_proj", "down_proj"))
        else:
            h = h + linear(torch.nn.functional.silu(linear(x, p + "mlp.gate_proj")) * linear(x, p + "mlp.up_proj"), p + "mlp.down_proj")
    h = rms(h, "model.norm")
    head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return h @ head.T


def sparse_moe(w, x, p, E, K, renormalise, names):
    """MixtralSparseMoeBlock and Qwen3MoeSparseMoeBlock: router logits = x gate^T; routing_weights = softmax
    over the experts, the top K of them, renormalised to sum to 1 (Mixtral; Qwen3-MoE with norm_topk_prob);
    each expert down(silu(gate x) * up x), names = (gate, up, down) of its tensors."""
    probs = torch.softmax(x @ w[p + "gate.weight"].T, dim=-1)
    top, idx = torch.topk(probs, K, dim=-1)
    if renormalise:
        top = top / top.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(E):
        q = p + "experts.%d." % e
        g, u, d = (w[q + n + ".weight"] for n in names)
        y = (torch.nn.functional.silu(x @ g.T) * (x @ u.T)) @ d.T
        out = out + y * (top * (idx == e)).sum(dim=-1, keepdim=True)
    return out


def logits(d, dtrain_file, ids):
    config, tensors = read_model_dir(d)
    ids = [int(i) for i in ids]
    arch = config["architectures"][0]
    if arch == "GPT2LMHeadModel":  # files saved from GPT2Model name tensors without "transformer."
        tensors = {(k if k.startswith(("transformer.", "lm_head.")) else "transformer." + k): v for k, v in tensors.items()}
    with torch.no_grad():
        if arch == "GPT2LMHeadModel":
            ref = gpt2_forward(config, tensors, ids)
        elif arch in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MixtralForCausalLM",
                      "Qwen3MoeForCausalLM"):
            if arch == "Qwen2ForCausalLM":  # modeling_qwen2.py: q_proj, k_proj, v_proj with bias=True; o_proj and the MLP without
                for l in range(config["num_hidden_layers"]):
                    p = "model.layers.%d." % l
                    for name in ("q_proj", "k_proj", "v_proj"):
                        if p + "self_attn." + name + ".bias" not in tensors:
                            fail("Qwen2's %s has no bias in layer %d" % (name, l))
                    for name in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
                        if p + name + ".bias" in tensors:
                            fail("Qwen2's %s has a bias in layer %d" % (name, l))
            ref = llama_forward(config, tensors, ids, hidden=sliding_window_hidden(len(ids), config))
        else:
            fail("unknown architecture " + arch)
    ours = np.fromfile(dtrain_file, dtype=np.float32).astype(np.float64).reshape(len(ids), -1)
    if ours.shape != tuple(ref.shape):
        fail("dtrain's logits have shape %s, the reference %s" % (ours.shape, tuple(ref.shape)))
    ref = ref.numpy()
    scale = np.abs(ref).max()
    err = np.abs(ours - ref).max() / scale
    print("%s: %d ids x %d vocab, max |dtrain - reference| / max |logit| = %.3g (max |logit| %.3g)" %
          (arch, ours.shape[0], ours.shape[1], err, scale))
    if not (err <= 1e-5):
        fail("logits differ by %.3g relative (tolerance 1e-5)" % err)
    if scale < 1e-3:
        fail("the logits are all near zero: the test would not see a wrong layout")
    print("OK")


def ltor_masks_and_position_ids(tokens, eod):
    """Megatron's get_ltor_masks_and_position_ids for one sample with reset_position_ids,
    reset_attention_mask and eod_mask_loss: (attention mask, True where a query must not see a key;
    position ids; loss mask)."""
    T = len(tokens)
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    positions = torch.arange(T)
    prev = 0
    for i in [j for j in range(T) if tokens[j] == eod]:
        allowed[i + 1:, : i + 1] = False
        positions[i + 1:] -= i + 1 - prev
        prev = i + 1
    loss_mask = torch.tensor([0.0 if t == eod else 1.0 for t in tokens], dtype=torch.float64)
    return ~allowed, positions, loss_mask


def packed_batch(out, vocab, T, eod, longest=7):
    rng = np.random.default_rng(4321)
    lengths, total = [5, 1], 6
    while total < T + 1:
        lengths.append(int(rng.integers(2, longest)))
        total += lengths[-1]
    window = []
    for n in lengths:  # each document: n - 1 ids other than EOD, then EOD
        window += [int(x) + (int(x) >= eod) for x in rng.integers(0, vocab - 1, n - 1)] + [eod]
    window = window[: T + 1]
    tokens, targets = window[:T], window[1:]
    hidden, positions, loss_mask = ltor_masks_and_position_ids(tokens, eod)
    answers = torch.tensor(rng.integers(0, 2, T), dtype=torch.float64)  # the data's own mask: prompts 0, answers 1
    answers[0] = 1.0
    mask = loss_mask * answers
    doc_start = torch.arange(T) - positions
    with open(out, "wb") as f:
        f.write(struct.pack("<i", T))
        f.write(np.array(tokens, dtype=np.int32).tobytes())
        f.write(np.array(targets, dtype=np.int32).tobytes())
        f.write(mask.numpy().astype(np.float32).tobytes())
        f.write(doc_start.numpy().astype(np.int32).tobytes())
        f.write(positions.numpy().astype(np.int32).tobytes())
    print("packed-batch: %d tokens, %d documents (ends at %s), %d counted targets" %
          (T, sum(1 for t in tokens if t == eod) + 1, [i for i in range(T) if tokens[i] == eod], int(mask.sum())))


def packed(d, grads_dir, batch, dtrain_loss):
    """Tolerance: dtrain computes in fp32 (u = 2^-24 a rounding), the reference in fp64. The logits'
    bound (see logits: n = 1984 roundings on a path of the test models, 4 of sqrt(n) u) holds for the
    loss, a mean of log-sum-exps of those logits; the gradients go back along the same paths twice
    more (the backward's two products per layer, and the attention's recomputed probabilities): 3n
    roundings, 4 sqrt(3n) u = 1.8e-5 of a tensor's largest gradient; twice that is the tolerance,
    since a gradient tensor's largest value may be a sum with cancellation at about half the size of
    its terms. A wrong mask, position or masked target is 1e-2 or more."""
    config, w = read_model_dir(d)
    arch = config["architectures"][0]
    if arch == "GPT2LMHeadModel":
        w = {(k if k.startswith(("transformer.", "lm_head.")) else "transformer." + k): v for k, v in w.items()}
    raw = open(batch, "rb").read()
    (T,) = struct.unpack("<i", raw[:4])
    arr = lambda i, dt: np.frombuffer(raw[4 + 4 * T * i: 4 + 4 * T * (i + 1)], dtype=dt)
    tokens, targets, mask = arr(0, np.int32), arr(1, np.int32), torch.from_numpy(arr(2, np.float32).astype(np.float64))
    eod_positions = torch.from_numpy(arr(4, np.int32).astype(np.int64))
    # The reference's own mask and positions from the tokens (Megatron's function), not dtrain's arrays.
    eod = int(tokens[[i for i in range(T) if i > 0 and eod_positions[i] == 0][0] - 1])
    hidden, positions, _ = ltor_masks_and_position_ids([int(t) for t in tokens], eod)
    window = sliding_window_hidden(T, config)  # Mistral's window on top of the documents' mask
    if window is not None:
        hidden = hidden | window
    if not torch.equal(positions, eod_positions):
        fail("the batch's position ids are not Megatron's for its end-of-document tokens")
    params = {k: v.clone().requires_grad_(True) for k, v in w.items() if not k.endswith(".attn.bias") and not k.endswith(".masked_bias")}
    forward = gpt2_forward if arch == "GPT2LMHeadModel" else llama_forward
    out = forward(config, params, torch.from_numpy(tokens.astype(np.int64)), positions, hidden)
    token_loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(targets.astype(np.int64)), reduction="none")
    loss = (token_loss * mask).sum() / mask.sum()
    loss.backward()
    ours = float(open(dtrain_loss).read().split()[1])
    rel = abs(ours - loss.item()) / abs(loss.item())
    print("%s: loss %.9f (dtrain %.9f, relative difference %.2e) over %d counted targets" % (arch, loss.item(), ours, rel, int(mask.sum())))
    if not rel <= 1e-6:
        fail("the masked loss differs by %.3g relative (tolerance 1e-6)" % rel)
    _, grads = read_model_dir(grads_dir)
    if arch == "GPT2LMHeadModel":
        grads = {(k if k.startswith(("transformer.", "lm_head.")) else "transformer." + k): v for k, v in grads.items()}
    worst, worst_name = 0.0, ""
    for name, g in grads.items():
        ref = params[name].grad
        if ref is None:
            fail("the reference has no gradient for " + name)
        scale = ref.abs().max().item()
        err = (g - ref).abs().max().item() / (scale if scale > 0 else 1.0)
        if err > worst:
            worst, worst_name = err, name
        if scale == 0.0:
            fail(name + ": the reference's gradient is zero; the test would not see a fault there")
    print("%s: %d gradient tensors, largest max |dtrain - reference| / max |reference| = %.2e (%s)" % (arch, len(grads), worst, worst_name))
    if not worst <= 4e-5:
        fail("gradients differ by %.3g relative in %s (tolerance 4e-5)" % (worst, worst_name))
    print("OK")


def llama3_scaling(freqs, s):
    """Llama 3.1's RoPE frequencies, as Meta's reference code publishes them (apply_scaling in
    llama-models' model.py), with the four numbers of config.json's rope_scaling, in float64."""
    factor, low, high, old_context = s["factor"], s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(freq)
        elif wavelen > low_freq_wavelen:
            out.append(freq / factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return out


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


def random_model(arch):
    g = torch.Generator().manual_seed(7)
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.2)
    ones = lambda n: 1.0 + r(n)
    V, C, L, T = 256, 32, 2, 16
    w = {}
    if arch == "gpt2":
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T, "n_ctx": T,
                  "n_embd": C, "n_layer": L, "n_head": 4, "n_inner": None, "activation_function": "gelu_new",
                  "layer_norm_epsilon": 1e-5}
        w["wte.weight"], w["wpe.weight"] = r(V, C), r(T, C)
        for l in range(L):
            p = "h.%d." % l
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = ones(C), r(C)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = r(C, 3 * C), r(3 * C)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = r(C, C), r(C)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = ones(C), r(C)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = r(C, 4 * C), r(4 * C)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = r(4 * C, C), r(C)
            w[p + "attn.bias"] = torch.tril(torch.ones(T, T, dtype=torch.float64)).view(1, 1, T, T)
        w["ln_f.weight"], w["ln_f.bias"] = ones(C), r(C)
    else:
        H, G, F, D = 4, 2, 48, C // 4
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": C,
                  "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G,
                  "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": True,
                  "hidden_act": "silu", "rope_scaling": None}
        w["model.embed_tokens.weight"] = r(V, C)
        for l in range(L):
            p = "model.layers.%d." % l
            w[p + "input_layernorm.weight"], w[p + "post_attention_layernorm.weight"] = ones(C), ones(C)
            w[p + "self_attn.q_proj.weight"], w[p + "self_attn.o_proj.weight"] = r(H * D, C), r(C, H * D)
            w[p + "self_attn.k_proj.weight"], w[p + "self_attn.v_proj.weight"] = r(G * D, C), r(G * D, C)
            w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"], w[p + "mlp.down_proj.weight"] = r(F, C), r(F, C), r(C, F)
        w["model.norm.weight"] = ones(C)
        if arch == "llama31":  # Llama 3.1's scaling, with an original context of 64 so that the test's
            # 4 pairs (wavelengths 2 pi 10000^(i/4): 6.3, 63, 628, 6283) meet all three of its cases
            config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64}
    return config, w


def write(arch, d):
    os.makedirs(d)
    config, w = random_model(arch)
    json.dump(config, open(os.path.join(d, "config.json"), "w"), indent=2)
    dtype, code = (np.float16, "F16") if arch == "gpt2" else (np.float32, "BF16")
    names = sorted(w)
    order = [names[i] for i in torch.randperm(len(names), generator=torch.Generator().manual_seed(3)).tolist()]
    groups = [order] if arch == "gpt2" else [order[: len(order) // 2], order[len(order) // 2:]]
    weight_map = {}
    for k, group in enumerate(groups):
        file = "model.safetensors" if len(groups) == 1 else "model-%05d-of-%05d.safetensors" % (k + 1, len(groups))
        header, data = {"__metadata__": {"format": "pt"}}, b""
        for name in group:
            a = w[name].numpy()
            raw = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) if code == "BF16" else a.astype(dtype)  # BF16: truncated
            header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [len(data), len(data) + raw.nbytes]}
            data += raw.tobytes()
            weight_map[name] = file
        write_safetensors(os.path.join(d, file), header, data)
    if len(groups) > 1:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    print("wrote %s: %d tensors in %d file(s), %s" % (d, len(w), len(groups), code))


def damage(kind, src, dst):
    shutil.copytree(src, dst)
    index = os.path.join(dst, "model.safetensors.index.json")
    files = sorted(json.load(open(index))["weight_map"].values()) if os.path.exists(index) else ["model.safetensors"]
    path = os.path.join(dst, files[-1])
    n, header = read_header(path)
    data = open(path, "rb").read()[8 + n:]
    names = sorted(k for k in header if k != "__metadata__")
    victim = [x for x in names if x.endswith(".weight") and len(header[x]["shape"]) == 2][0]
    if kind == "missing_tensor":  # header entry and bytes gone, offsets of the others moved
        begin, end = header[victim]["data_offsets"]
        del header[victim]
        for name in names:
            if name in header and header[name]["data_offsets"][0] >= end:
                header[name]["data_offsets"] = [o - (end - begin) for o in header[name]["data_offsets"]]
        data = data[:begin] + data[end:]
        write_safetensors(path, header, data)
    elif kind == "wrong_shape":
        r, c = header[victim]["shape"]
        header[victim]["shape"] = [c, r] if r != c else [r * c]
        write_safetensors(path, header, data)
    elif kind == "extra_tensor":
        victim = "model.layers.0.mlp.extra.weight"
        header[victim] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        write_safetensors(path, header, data + b"\0\0\0\0")
    elif kind == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 100)
        victim = os.path.basename(path)
    elif kind == "bad_header":
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(b"[not json")
        victim = os.path.basename(path)
    elif kind == "no_config":
        os.remove(os.path.join(dst, "config.json"))
        victim = "config.json"
    elif kind == "rope_parameters":  # transformers 5 keeps theta and the scaling here: a scaled RoPE
        c = json.load(open(os.path.join(dst, "config.json")))
        c.pop("rope_theta", None)
        c.pop("rope_scaling", None)
        c["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0}
        json.dump(c, open(os.path.join(dst, "config.json"), "w"))
        victim = "rope_parameters"
    elif kind == "huge_model":  # a config.json far larger than its files (and than memory)
        c = json.load(open(os.path.join(dst, "config.json")))
        c.update({"num_hidden_layers": 4096, "hidden_size": 65536, "num_attention_heads": 64, "num_key_value_heads": 64,
                  "head_dim": 1024})
        json.dump(c, open(os.path.join(dst, "config.json"), "w"))
        victim = "model.embed_tokens.weight"
    elif kind == "trailing_bytes":  # 8 bytes after the last tensor's data
        write_safetensors(path, header, data + b"\0" * 8)
        victim = os.path.basename(path)
    elif kind == "gap":  # 8 bytes that belong to no tensor, just before the victim's data
        begin = header[victim]["data_offsets"][0]
        for name in names:
            if header[name]["data_offsets"][0] >= begin:
                header[name]["data_offsets"] = [o + 8 for o in header[name]["data_offsets"]]
        write_safetensors(path, header, data[:begin] + b"\0" * 8 + data[begin:])
    elif kind == "huge_shape":  # a shape whose byte count does not fit 64 bits
        header[victim]["shape"] = [2 ** 32, 2 ** 32]
        write_safetensors(path, header, data)
    elif kind == "nan":  # one element of the victim a NaN, in the file's own dtype
        begin = header[victim]["data_offsets"][0]
        nan = struct.pack("<f", float("nan")) if header[victim]["dtype"] == "F32" else struct.pack("<H", 0x7FC0 if header[victim]["dtype"] == "BF16" else 0x7E00)
        data = data[:begin + len(nan)] + nan + data[begin + 2 * len(nan):]
        write_safetensors(path, header, data)
    elif kind == "index_missing_tensor":
        j = json.load(open(index))
        del j["weight_map"][victim]
        json.dump(j, open(index, "w"))
    else:
        fail("unknown damage " + kind)
    print(victim)


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "logits":
        logits(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "damage":
        damage(*sys.argv[2:])
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "packed-batch":
        packed_batch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), *[int(a) for a in sys.argv[6:]])
    elif len(sys.argv) == 6 and sys.argv[1] == "packed":
        packed(*sys.argv[2:])
    elif len(sys.argv) >= 8 and sys.argv[1] == "family":  # both checks of one model, one interpreter start
        logits(sys.argv[2], sys.argv[3], sys.argv[7:])
        packed(sys.argv[2], sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        fail("usage: hf_reference.py logits DIR LOGITS.f32 ID... | write ARCH DIR | damage KIND SRC DST | packed-batch OUT.bin VOCAB T EOD [LONGEST]"
             " | packed DIR GRADS_DIR BATCH.bin DTRAIN_LOSS | family DIR LOGITS.f32 GRADS_DIR BATCH.bin DTRAIN_LOSS ID...")


if __name__ == "__main__":
    main()

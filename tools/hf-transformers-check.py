#!/usr/bin/env python3
"""hf-transformers-check.py DIR DTRAIN_LOGITS.f32 ID...: loads a Hugging Face directory that dtrain
exported (ckpt-consolidate --export-hf) with transformers' own AutoModelForCausalLM.from_pretrained, runs
the ids through it in float64 on the CPU and compares its logits with dtrain's (float32 rows, one per id,
written by model_logits). Tolerance 1e-5 of the largest |logit|: dtrain computes in fp32 (about 1e-7
relative per operation, a few hundred operations deep), transformers here in fp64; a wrong layout or a
config key transformers reads differently (a missing transpose, swapped q/k, a wrong RoPE pairing, an
untied head) is 1e-1 or more. Prints one line; exit 0 agree, 1 differ, 77 transformers missing."""
import sys

import numpy as np

if len(sys.argv) < 4:
    sys.exit(__doc__)
try:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
except ImportError as e:
    print("hf-transformers-check: transformers is not installed here (%s): skipped" % e)
    sys.exit(77)

directory, logits_file, ids = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
config = AutoConfig.from_pretrained(directory)
model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float64).eval()
with torch.no_grad():
    theirs = model(torch.tensor([ids])).logits[0].numpy()
ours = np.fromfile(logits_file, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)
if ours.shape != theirs.shape:
    print("FAIL %s: dtrain's logits are %s, transformers' %s" % (directory, ours.shape, theirs.shape))
    sys.exit(1)
err = np.abs(ours - theirs).max() / np.abs(theirs).max()
ok = err <= 1e-5
print("%s %s (%s, transformers %s): logits max |dtrain - transformers| / max |logit| = %.2e (tolerance 1e-5)" % (
    "PASS" if ok else "FAIL", directory, type(model).__name__, transformers.__version__, err))
sys.exit(0 if ok else 1)

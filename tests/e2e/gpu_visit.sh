#!/usr/bin/env bash
# tools/gpu-visit on a machine without a GPU (nvidia-smi is replaced by one that fails, so the test means
# the same on a GPU machine), from the build tree:
#   no_gpu      the default stages: exit 77 after the preflight alone, within 30 s, saying there is no GPU;
#               --variants with a missing folder: exit 2, naming it; the report's variants step: this
#               tree's step time over a variant's, from their JSON (hand-made here: the timing needs a GPU)
#   cpu_stages  --stages torch,hf,fp8,llama1b (the stages that need no GPU), /usr/bin's python3 (PyTorch): the torch
#               script ran at its tiny shape on the CPU; the hf stage trained and exported its three models
#               (its log holds the config.json of a GPT2LMHeadModel and of two LlamaForCausalLM, one with
#               Llama 3.1's rope_scaling), and without
#               transformers the stage is skipped (exit 77), not failed, in summary.json and the exit code;
#               fp8 and llama1b at their tiny CPU shapes: both precisions ran, fp8's late losses within the
#               bound and not bf16's, the Llama run timed beside PyTorch's (eager) at its micro-batch
#   gpu_visit.sh CASE SOURCE_DIR BUILD_DIR
set -u
case=$1 src=$2 build=$3
source "$(dirname "$0")/lib.sh"
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed (a stand-in: no GPU here)" >&2\nexit 9\n' > "$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
export PATH="$work/bin:/usr/bin:/bin:$PATH"
out=$work/out

case $case in
  no_gpu)
    t0=$SECONDS
    "$src/tools/gpu-visit" --build "$build" "$out" > "$work/visit.log" 2>&1
    rc=$? seconds=$((SECONDS - t0))
    cat "$work/visit.log"
    [ $rc = 77 ] || fail "gpu-visit exited $rc, expected 77 (no GPU)"
    grep -q "^gpu-visit: no GPU visible" "$work/visit.log" || fail "gpu-visit did not say that there is no GPU"
    grep -q "^gpu: none visible" "$out/preflight.log" || fail "the preflight did not report the missing GPU"
    [ "$seconds" -le 30 ] || fail "gpu-visit took ${seconds}s to find that there is no GPU"
    python3 - "$out/summary.json" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))["stages"]
assert list(s) == ["preflight"] and s["preflight"]["passed"], s
PY
    echo "exit 77 after ${seconds}s, only the preflight ran"
    "$src/tools/gpu-visit" --build "$build" --variants "$work/none" "$out" > "$work/variants.log" 2>&1
    rc=$?
    [ $rc = 2 ] && grep -q "no variants folder at $work/none" "$work/variants.log" || { cat "$work/variants.log"; fail "--variants of a missing folder: exit $rc"; }
    mkdir -p "$work/report/var"
    echo '{"runs": [{"micro_batch": 16, "step_ms_median": 36.0, "step_ms_min": 35.0}]}' > "$work/report/dtrain.json"
    echo '{"runs": [{"micro_batch": 16, "step_ms_median": 40.0, "step_ms_min": 37.5}]}' > "$work/report/var/old.json"
    python3 "$src/tools/gpu_visit_report.py" variants "$work/report" > "$work/report/variants.json" || fail "the report's variants step"
    python3 - "$work/report/variants.json" <<'PY' || fail "the variants' ratios"
import json, sys
d = json.load(open(sys.argv[1]))
q = d["main_over_variant"]["old"]
assert q == {"micro_batch": 16, "step_ms_median": 0.9, "step_ms_min": 35.0 / 37.5}, q
assert d["variants"]["old"]["runs"][0]["step_ms_median"] == 40.0
PY
    python3 "$src/tools/gpu_visit_report.py" show-variants "$work/report/variants.json" | grep -q "this tree over old at mb 16: step time x0.900" ||
      fail "show-variants"
    ;;
  cpu_stages)
    "$src/tools/gpu-visit" --build "$build" --stages torch,hf,fp8,llama1b "$out" > "$work/visit.log" 2>&1
    rc=$?
    cat "$work/visit.log"
    [ $rc = 0 ] || fail "gpu-visit --stages torch,hf,fp8,llama1b exited $rc"
    transformers=0
    python3 -c 'import transformers' 2> /dev/null && transformers=1
    python3 - "$out" "$transformers" <<'PY' || fail "summary.json or hf.log"
import json, os, re, sys
out, transformers = sys.argv[1], sys.argv[2] == "1"
s = json.load(open(os.path.join(out, "summary.json")))["stages"]
assert set(s) == {"preflight", "torch", "hf", "fp8", "llama1b"}, s
f = s["fp8"]  # both precisions ran, their late losses compared, their speeds side by side
assert f["passed"] and f["within_bound"] and len(f["bf16"]["losses"]) == len(f["fp8"]["losses"]) == 60, f
assert f["late_loss"]["fp8"] != f["late_loss"]["bf16"] and f["fp8_over_bf16_tokens_per_s"] > 0, f
l = s["llama1b"]
assert l["passed"] and l["micro_batch"] == 2 and l["tokens_per_s_median"] > 0 and l["mfu_vs_measured_gemm"] > 0, l
assert l["flops_per_token"] > 0 and l["mfu_vs_peak"] > 0, l  # from the GFLOP/token dtrain printed
assert l["torch"] and l["torch"][0]["impl"] == "eager" and l["dtrain_over_torch"]["eager"]["tokens_per_s"] > 0, l
t = s["torch"]
assert t["passed"] and not t["skipped"] and t["device"] == "cpu", t
assert t["runs"] and all(r["impl"] == "eager" and r["tokens_per_s_median"] > 0 for r in t["runs"]), t["runs"]
h = s["hf"]
if transformers:
    assert h["passed"], h
else:
    assert h == {**h, "passed": False, "skipped": True, "exit": 77}, h
# The exports' config.json, as the stage printed them.
log = open(os.path.join(out, "hf.log")).read()
found, scaled = [], 0
for m in re.finditer(r"^\{$.*?^\}$", log, re.S | re.M):
    config = json.loads(m.group(0))
    found += config.get("architectures", [])
    scaled += (config.get("rope_scaling") or {}).get("rope_type") == "llama3"
assert sorted(found) == ["GPT2LMHeadModel", "LlamaForCausalLM", "LlamaForCausalLM"], found
assert scaled == 1, scaled
print("torch: %d run(s) on the CPU; hf: %s, exported %s" % (len(t["runs"]), "passed" if h["passed"] else "skipped (no transformers)", found))
PY
    ;;
  *) fail "unknown case '$case'" ;;
esac
echo PASS

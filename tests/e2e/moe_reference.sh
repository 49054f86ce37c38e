#!/bin/bash
# moe_reference.sh CASE MOE_BLOCK SOURCE_DIR: dtrain's MoE layer (tests/e2e/moe_block) against PyTorch
# (tests/e2e/moe_reference.py). Cases: gelu_dropless (GELU experts with biases, top-2 of 4, aux loss
# 0.01), swiglu_capacity (SwiGLU experts without biases, top-2 of 4, capacity factor 0.75: drops),
# top1_capacity (top-1 of 3, capacity 1.0, aux loss 0.1, GELU with biases), swiglu_renormalised (Mixtral's and
# Qwen3-MoE's routing: the top-2 of 4 renormalised, model.moe_router_pre_softmax=false; SwiGLU, aux loss 0.01).
set -euo pipefail
case_name=$1 tool=$2 src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" 2>/dev/null || { echo "python3-torch is not installed: skipped"; exit 77; }
case $case_name in
  gelu_dropless) args=(4 2 8 0 1 0 0.01 0) ;;
  swiglu_capacity) args=(4 2 8 1 0 0.75 0.01 0) ;;
  top1_capacity) args=(3 1 12 0 1 1.0 0.1 0) ;;
  swiglu_renormalised) args=(4 2 8 1 0 0 0.01 1) ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
read -r E K F swiglu bias capacity coeff renormalise <<< "${args[*]}"
overrides=(--model.num_experts="$E" --model.moe_router_topk="$K" --model.moe_ffn_hidden_size="$F" --model.moe_aux_loss_coeff="$coeff"
           --model.swiglu=$([ "$swiglu" = 1 ] && echo true || echo false) --model.add_bias_linear=$([ "$bias" = 1 ] && echo true || echo false))
[ "$capacity" != 0 ] && overrides+=(--model.moe_capacity_factor="$capacity")
[ "$renormalise" = 1 ] && overrides+=(--model.moe_router_pre_softmax=false)
"$tool" "$work" "${overrides[@]}"
/usr/bin/python3 "$src/tests/e2e/moe_reference.py" "$work" "${args[@]}"

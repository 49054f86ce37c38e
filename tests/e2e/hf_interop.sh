#!/usr/bin/env bash
# Hugging Face interop end to end: ckpt-consolidate --export-hf / --import-hf and checkpoint.init_from.
#   hf_interop.sh CASE DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE MODEL_LOGITS SOURCE_DIR
#   logits_gpt2, logits_llama, logits_llama_mha
#       a small model trained 5 steps at tp=2 (so no norm weight is still 1 and no bias 0) is exported
#       from its checkpoint (one file) and from model-final.h5 on 2 ranks (shards + index: a file layout,
#       the same for every family); the PyTorch forward of the published architecture on those files
#       (hf_reference.py, json + numpy reading) matches dtrain's logits to 1e-5; both exports of the same
#       weights are byte-identical tensors (llama: RMSNorm, RoPE, SwiGLU, 8 heads on 2 key/value groups,
#       untied, no biases; llama_mha: multi-head attention, tied, with biases)
#   import_python_written
#       directories written by hf_reference.py's own safetensors writer (GPT-2 as the original upload:
#       bare names, mask buffers, F16; Llama: BF16, two shards, shuffled tensors; Llama 3.1: rope_scaling
#       llama3, its float64 reference Meta's published formula) import, and dtrain's logits with the
#       imported weights match the PyTorch forward on those files to 1e-5; Llama 3.1's directory exported
#       again writes the same rope_scaling
#   packed_reference
#       documents packed in one sample with a fine-tuning loss mask (hf_reference.py packed-batch: Megatron's
#       masks and position ids for its end-of-document tokens): dtrain's masked loss and every gradient
#       (model_grads, exported with --export-hf) against PyTorch's autograd with an explicit
#       block-diagonal attention mask and the reset position ids, for GPT-2 (learned positions) and Llama
#       (RoPE, grouped-query)
#   families
#       each further family, a small model trained and exported as above (one file): its logits against the
#       PyTorch forward (1e-5); on a packed sample (Mistral's with documents of up to 19 tokens) its masked loss and every
#       gradient against PyTorch's autograd as packed_reference (load-balancing loss off: the reference
#       has none); and the export imported and exported again gives the same config.json and safetensors
#       byte for byte. mistral: llama's with a sliding window of 9 keys at T = 32, the reference masking
#       as transformers' sliding-window mask does (inside a document too), and heads of 16 dims (head_dim,
#       model.kv_channels) at hidden 64 with 8 heads, as Mistral Nemo's are wider than 5120/32; qwen2:
#       biases on q, k, v only, tied, the reference checking that convention on the files; qwen3: heads of
#       16 dims at hidden 64 with 8 heads, each head's queries and keys RMS-normalised before RoPE as
#       modeling_qwen3 does; mixtral: every MLP 4 experts of 48, top-2 renormalised as modeling_mixtral
#       routes; qwen3_moe: Qwen3's attention with 4 experts of 32, top-2 with norm_topk_prob, in layers
#       0, 2 and 3 (layer 1 dense: mlp_only_layers), placed by the reference with modeling_qwen3_moe's rule
#   roundtrip
#       export -> import -> export is byte-identical (fp32 one file, bf16, fp16, fp32 shards); the F16
#       export is numpy's float16 rounding of the fp32 one bit for bit, and h5py reads the imported
#       file's weights as float16
#   init_from
#       imported weights start training at tp=2 pp=2 and on 1 rank with the same first loss (1e-6),
#       far below a fresh model's, and checkpoint.init_from=hf:DIR on 1 rank with the very same first loss
#       as the weights file there (no converted file left); a model with other keys is refused naming the key;
#       an input without the model's keys takes them from config.json (the same first loss), and keys it
#       gives that differ from config.json's are refused, each named
#   bad_missing_tensor, bad_wrong_shape, bad_extra_tensor, bad_truncated, bad_bad_header, bad_no_config,
#   bad_index_missing_tensor, bad_trailing_bytes, bad_gap, bad_huge_shape, bad_nan (a NaN in a tensor: the
#   error names the Hugging Face file and tensor, not a temporary file and dtrain's name)
#       a damaged directory: --import-hf fails with one error naming the file and the tensor, exit 2,
#       and writes no weights file
#   export_refusals
#       a non-empty export directory, a model neither GPT-2 nor Llama, a bad --max-shard-size: one error each;
#       a NaN met by one of 3 exporting ranks: exit 2 everywhere and no file left
set -u
case_name=$1 dtrain=$2 data_tool=$3 consolidate=$4 logits_tool=$5 src=$6
here=$(dirname "$0")
source "$here/lib.sh"
reference="/usr/bin/python3 $here/hf_reference.py"
/usr/bin/python3 -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" 2>/dev/null || fail "python3-torch is missing (tools/install-deps installs it)"

make_small_data "$data_tool" 80
ids="10 67 97 108 108 32 109 101 32 73 115 104 109 97 101 108 46 32 83 111 109 101 32 121 101 97 114 115"
short_ids="10 67 97 108 108 32 109 101 32 73 115 104 109 97 101"  # seq_length 16 of the written models

# write_ini NAME [MODEL KEY LINES...]: a small model on the test data, 4 layers, tp=2.
write_ini() {
  local name=$1
  shift
  {
    echo "[model]"
    echo "num_layers = 4"
    echo "hidden_size = 64"
    echo "seq_length = 32"
    echo "vocab_size = 256"
    echo "global_batch_size = 4"
    echo "micro_batch_size = 2"
    printf '%s\n' "$@"
    printf '[system]\ntensor_model_parallel_size = 2\n[training]\ntrain_iters = 5\neval_interval = 0\n'
    printf '[optimizer]\nlr = 1e-2\nmin_lr = 1e-3\nwarmup_iters = 0\n'
    printf '[data]\npath = %s\n[checkpoint]\ndir = %s\n[logging]\nlog_interval = 1\n' "$work/d" "$work/ck-$name"
  } > "$work/$name.ini"
}
write_ini gpt2 "num_attention_heads = 4"
write_ini llama "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "ffn_hidden_size = 176" \
  "normalization = RMSNorm" "norm_epsilon = 1e-6" "position_embedding_type = rope" "rotary_base = 500000" "swiglu = true" \
  "untie_embeddings_and_output_weights = true" "add_bias_linear = false"
write_ini llama_mha "num_attention_heads = 4" "ffn_hidden_size = 160" "normalization = RMSNorm" \
  "position_embedding_type = rope" "swiglu = true" "add_bias_linear = true"
write_ini mistral "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "ffn_hidden_size = 176" \
  "normalization = RMSNorm" "norm_epsilon = 1e-6" "position_embedding_type = rope" "swiglu = true" \
  "untie_embeddings_and_output_weights = true" "add_bias_linear = false" "window_size = 9" "kv_channels = 16"
write_ini qwen2 "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "ffn_hidden_size = 176" \
  "normalization = RMSNorm" "norm_epsilon = 1e-6" "position_embedding_type = rope" "rotary_base = 1000000" "swiglu = true" \
  "add_bias_linear = false" "add_qkv_bias = true"
write_ini qwen3 "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "ffn_hidden_size = 176" \
  "normalization = RMSNorm" "norm_epsilon = 1e-6" "position_embedding_type = rope" "rotary_base = 1000000" "swiglu = true" \
  "add_bias_linear = false" "kv_channels = 16" "qk_layernorm = true"
write_ini mixtral "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "normalization = RMSNorm" \
  "norm_epsilon = 1e-5" "position_embedding_type = rope" "rotary_base = 1000000" "swiglu = true" \
  "untie_embeddings_and_output_weights = true" "add_bias_linear = false" "num_experts = 4" "moe_router_topk = 2" \
  "moe_ffn_hidden_size = 48" "moe_router_pre_softmax = false" "moe_aux_loss_coeff = 0.02"
write_ini qwen3_moe "num_attention_heads = 8" "group_query_attention = true" "num_query_groups = 2" "normalization = RMSNorm" \
  "norm_epsilon = 1e-6" "position_embedding_type = rope" "rotary_base = 1000000" "swiglu = true" "kv_channels = 16" \
  "qk_layernorm = true" "untie_embeddings_and_output_weights = true" "add_bias_linear = false" "num_experts = 4" \
  "moe_router_topk = 2" "moe_ffn_hidden_size = 32" "moe_router_pre_softmax = false" "moe_layer_pattern = [1,0,1,1]" "ffn_hidden_size = 96"

train() {  # train NAME [ARGS...]: 2 ranks, tp=2
  local name=$1
  shift
  timeout 300 mpirun -np 2 "$dtrain" "$work/$name.ini" "$no_sample" "$given_peak" "$@" > "$work/train-$name.log" 2>&1 || { cat "$work/train-$name.log"; fail "training $name"; }
}
run_consolidate() {  # run_consolidate LOG ARGS...: must succeed
  local log=$1
  shift
  timeout 120 "$consolidate" "$@" > "$log" 2>&1 || { cat "$log"; fail "ckpt-consolidate $*"; }
}
# same_tensors A B: the safetensors of two directories hold the same tensors byte for byte (compared as
# dictionaries: the files may be cut differently).
same_tensors() {
  /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$here')
import hf_reference as h
_, a = h.read_model_dir('$1'); _, b = h.read_model_dir('$2')
assert a.keys() == b.keys(), 'tensor names differ'
for k in a: assert (a[k] == b[k]).all(), k
print('same %d tensors' % len(a))" || fail "the exports $1 and $2 hold different tensors"
}

case $case_name in
  logits_gpt2|logits_llama|logits_llama_mha)
    name=${case_name#logits_}
    train "$name"
    run_consolidate "$work/export1.log" "$work/ck-$name" --export-hf "$work/hf-one"
    cat "$work/export1.log"
    [ -f "$work/hf-one/model.safetensors" ] && [ ! -f "$work/hf-one/model.safetensors.index.json" ] || fail "expected one file"
    cat "$work/hf-one/config.json"
    # shellcheck disable=SC2086
    "$logits_tool" "$work/$name.ini" "$work/ck-$name/model-final.h5" "$work/logits.f32" $ids || fail "model_logits"
    # shellcheck disable=SC2086
    $reference logits "$work/hf-one" "$work/logits.f32" $ids || fail "logits of hf-one"
    # The sharded export (a file layout, the same for every family).
    timeout 120 mpirun -np 2 "$consolidate" "$work/ck-$name/model-final.h5" --export-hf "$work/hf-shards" --max-shard-size 100KB \
      > "$work/export2.log" 2>&1 || { cat "$work/export2.log"; fail "sharded export"; }
    shards=$(ls "$work/hf-shards" | grep -c '^model-.*-of-.*\.safetensors$')
    [ "$shards" -ge 3 ] && [ -f "$work/hf-shards/model.safetensors.index.json" ] || fail "expected shards and an index, got: $(ls "$work/hf-shards")"
    echo "sharded export: $shards files"
    cmp "$work/hf-one/config.json" "$work/hf-shards/config.json" || fail "config.json differs between the exports"
    # shellcheck disable=SC2086
    $reference logits "$work/hf-shards" "$work/logits.f32" $ids || fail "logits of hf-shards"
    same_tensors "$work/hf-one" "$work/hf-shards" ;;
  import_python_written)
    for arch in gpt2 llama llama31; do
      $reference write $arch "$work/py-$arch" || fail "writing the $arch directory"
      run_consolidate "$work/i-$arch.log" --import-hf "$work/py-$arch" --out "$work/py-$arch.h5"
      grep -q "^\[model\]$" "$work/i-$arch.log" || { cat "$work/i-$arch.log"; fail "no [model] keys printed"; }
      sed -n '/^\[model\]$/,$p' "$work/i-$arch.log" > "$work/py-$arch.ini"
      # shellcheck disable=SC2086
      "$logits_tool" "$work/py-$arch.ini" "$work/py-$arch.h5" "$work/py-$arch.f32" $short_ids \
        || fail "model_logits $arch"
      # shellcheck disable=SC2086
      $reference logits "$work/py-$arch" "$work/py-$arch.f32" $short_ids || fail "logits $arch"
    done
    grep -q "^rope_scaling = llama3$" "$work/py-llama31.ini" || fail "Llama 3.1's rope_scaling was not imported"
    # The export writes the same rope_scaling back.
    run_consolidate "$work/x-llama31.log" "$work/py-llama31.h5" --export-hf "$work/back-llama31"
    /usr/bin/python3 -c "
import json, sys
a = json.load(open('$work/py-llama31/config.json'))['rope_scaling']
b = json.load(open('$work/back-llama31/config.json'))['rope_scaling']
print('rope_scaling written', a, 'exported', b)
sys.exit(a != b)" || fail "the export's rope_scaling differs from the imported one" ;;
  packed_reference)
    grads_tool=$(dirname "$logits_tool")/model_grads
    for arch in gpt2 llama; do
      $reference write $arch "$work/py-$arch" || fail "writing the $arch directory"
      run_consolidate "$work/i-$arch.log" --import-hf "$work/py-$arch" --out "$work/py-$arch.h5"
      sed -n '/^\[model\]$/,$p' "$work/i-$arch.log" | sed 's/^micro_batch_size = .*/micro_batch_size = 1/' > "$work/py-$arch.ini"
      seq=$(sed -n 's/^seq_length = //p' "$work/py-$arch.ini")
      vocab=$(sed -n 's/^vocab_size = //p' "$work/py-$arch.ini")
      $reference packed-batch "$work/batch-$arch.bin" "$vocab" "$seq" 3 || fail "writing the batch"
      "$grads_tool" "$work/py-$arch.ini" "$work/py-$arch.h5" "$work/batch-$arch.bin" "$work/g-$arch.h5" > "$work/loss-$arch.txt" ||
        fail "model_grads $arch"
      run_consolidate "$work/g-$arch.log" "$work/g-$arch.h5" --export-hf "$work/grads-$arch"
      $reference packed "$work/py-$arch" "$work/grads-$arch" "$work/batch-$arch.bin" "$work/loss-$arch.txt" || fail "the $arch reference"
    done ;;
  families)
    grads_tool=$(dirname "$logits_tool")/model_grads
    # A packed sample like packed_reference's (documents of 1-6 tokens); for Mistral one with documents of up
    # to 19 tokens, longer than its window of 9 keys, which then bites inside them. (The short documents
    # keep the head-norm weights' gradients, sums over every row and head with much cancellation, well
    # inside the tolerance: Qwen3's k_norm reaches 3.0e-5 of 4e-5 on the long ones, 1.6e-5 on these.)
    $reference packed-batch "$work/batch-short.bin" 256 32 3 || fail "writing the batch"
    $reference packed-batch "$work/batch-mistral.bin" 256 32 3 20 || fail "writing Mistral's batch"
    for name in mistral qwen2 qwen3 mixtral qwen3_moe; do
      batch=$work/batch-short.bin
      [ "$name" = mistral ] && batch=$work/batch-mistral.bin
      train "$name"
      run_consolidate "$work/export-$name.log" "$work/ck-$name" --export-hf "$work/hf-$name"
      cat "$work/hf-$name/config.json"
      # The round trip: imported and exported again, the same config.json and safetensors byte for byte.
      run_consolidate "$work/import-$name.log" --import-hf "$work/hf-$name" --out "$work/back-$name.h5"
      run_consolidate "$work/export2-$name.log" "$work/back-$name.h5" --export-hf "$work/hf2-$name"
      for f in config.json model.safetensors; do
        cmp "$work/hf-$name/$f" "$work/hf2-$name/$f" || fail "$name: $f differs after a round trip"
      done
      # shellcheck disable=SC2086
      "$logits_tool" "$work/$name.ini" "$work/ck-$name/model-final.h5" "$work/logits-$name.f32" $ids || fail "model_logits $name"
      grep -v -e '^micro_batch_size' -e '^moe_aux_loss_coeff' "$work/$name.ini" | sed 's/^\[model\]$/[model]\nmicro_batch_size = 1/' > "$work/g-$name.ini"
      "$grads_tool" "$work/g-$name.ini" "$work/ck-$name/model-final.h5" "$batch" "$work/g-$name.h5" > "$work/loss-$name.txt" ||
        fail "model_grads $name"
      run_consolidate "$work/gx-$name.log" "$work/g-$name.h5" --export-hf "$work/grads-$name"
      # shellcheck disable=SC2086
      $reference family "$work/hf-$name" "$work/logits-$name.f32" "$work/grads-$name" "$batch" "$work/loss-$name.txt" $ids ||
        fail "the $name reference"
    done ;;
  roundtrip)
    train gpt2
    train llama
    for name in gpt2 llama; do
      for variant in "fp32" "bf16 --dtype bf16" "fp16 --dtype fp16" "shards --max-shard-size 100KB"; do
        set -- $variant
        tag=$name-$1
        shift
        run_consolidate "$work/e.log" "$work/ck-$name" --export-hf "$work/a-$tag" "$@"
        run_consolidate "$work/i.log" --import-hf "$work/a-$tag" --out "$work/w-$tag.h5"
        extra=()
        [ "$tag" = "$name-shards" ] && extra=(--max-shard-size 100KB)
        run_consolidate "$work/e2.log" "$work/w-$tag.h5" --export-hf "$work/b-$tag" "${extra[@]}"
        diff -r "$work/a-$tag" "$work/b-$tag" > /dev/null || fail "$tag: import -> export is not byte-identical"
        echo "$tag: import -> export byte-identical ($(ls "$work/a-$tag" | wc -l) files, $(du -sb "$work/a-$tag" | cut -f1) bytes)"
      done
      h5dump -a /tokenizer "$work/w-$name-fp32.h5" | grep -q '"byte"' || fail "$name: the tokenizer identity did not travel"
      # The F16 export is numpy's own float16 rounding (nearest even) of the fp32 export, bit for bit, and
      # the imported weights file holds float16 datasets (h5py) with the same values.
      /usr/bin/python3 - "$work/a-$name-fp32/model.safetensors" "$work/a-$name-fp16/model.safetensors" "$work/w-$name-fp16.h5" <<'PY' ||
import json, struct, sys
import h5py, numpy as np
def tensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: (v['dtype'], raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]])
            for k, v in header.items() if k != '__metadata__'}
f32, f16 = tensors(sys.argv[1]), tensors(sys.argv[2])
assert f32.keys() == f16.keys()
for k in f32:
    assert f32[k][0] == 'F32' and f16[k][0] == 'F16', k
    want = np.frombuffer(f32[k][1], '<f4').astype(np.float16)
    got = np.frombuffer(f16[k][1], '<f2')
    assert np.array_equal(want.view(np.uint16), got.view(np.uint16)), k
with h5py.File(sys.argv[3], 'r') as h:
    weights = [n for n in h if isinstance(h[n], h5py.Dataset)]
    assert weights and all(h[n].dtype == np.float16 for n in weights), [h[n].dtype for n in weights]
print('F16: numpy float16 rounding of', len(f32), 'tensors, bit for bit; float16 datasets:', len(weights))
PY
        fail "$name: the fp16 export is not numpy's float16 rounding of the fp32 export"
    done ;;
  init_from)
    train llama
    run_consolidate "$work/e.log" "$work/ck-llama" --export-hf "$work/hf"
    run_consolidate "$work/i.log" --import-hf "$work/hf" --out "$work/imported.h5"
    cat "$work/i.log"
    grep -q "checkpoint.init_from = $work/imported.h5" "$work/i.log" || fail "import does not say how to use the file"
    grep -q "^num_query_groups = 2$" "$work/i.log" || fail "import does not print the model keys"
    first_loss() { grep -o '"loss": [0-9.e+-]*' "$1" | head -1 | awk '{print $2}'; }
    common=(--checkpoint.dir= --training.train_iters=1 --checkpoint.init_from="$work/imported.h5" "$no_sample" "$given_peak")
    timeout 300 mpirun -np 4 "$dtrain" "$work/llama.ini" "${common[@]}" --system.pipeline_model_parallel_size=2 \
      --system.sequence_parallel=true --logging.metrics_file="$work/tp2pp2.jsonl" > "$work/tp2pp2.log" 2>&1 \
      || { cat "$work/tp2pp2.log"; fail "init_from at tp2 pp2"; }
    grep -q "initialised the model from $work/imported.h5" "$work/tp2pp2.log" || { cat "$work/tp2pp2.log"; fail "no init message"; }
    timeout 300 mpirun -np 1 "$dtrain" "$work/llama.ini" "${common[@]}" --system.tensor_model_parallel_size=1 \
      --logging.metrics_file="$work/one.jsonl" > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "init_from on 1 rank"; }
    timeout 300 mpirun -np 1 "$dtrain" "$work/llama.ini" --checkpoint.dir= --training.train_iters=1 "$no_sample" "$given_peak" \
      --system.tensor_model_parallel_size=1 --logging.metrics_file="$work/fresh.jsonl" > "$work/fresh.log" 2>&1 \
      || { cat "$work/fresh.log"; fail "fresh run"; }
    a=$(first_loss "$work/tp2pp2.jsonl") b=$(first_loss "$work/one.jsonl") c=$(first_loss "$work/fresh.jsonl")
    echo "first loss: init_from tp2 pp2 $a, init_from 1 rank $b, fresh $c"
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || fail "no step line"
    # One forward pass from the same weights: tp splits sums of at most the 256-entry vocabulary and the
    # MLP's inputs (reorder_tol 256 0 in lib.sh); a fresh model is far above (0.3 nats).
    /usr/bin/python3 -c "import sys; a,b,c=$a,$b,$c; sys.exit(0 if abs(a-b) <= $(reorder_tol 256 0)*abs(b) and a < c - 0.3 else 1)" \
      || fail "init_from losses $a / $b against fresh $c"
    # The directory itself (hf:DIR): the same weights, so the same first loss bit for bit, and the
    # converted file gone afterwards.
    timeout 300 mpirun -np 1 "$dtrain" "$work/llama.ini" "${common[@]}" --checkpoint.dir="$work/ck-hf" \
      --checkpoint.init_from="hf:$work/hf" --system.tensor_model_parallel_size=1 \
      --logging.metrics_file="$work/hfdir.jsonl" > "$work/hfdir.log" 2>&1 || { cat "$work/hfdir.log"; fail "init_from=hf:DIR"; }
    grep -q "initialised the model from Hugging Face directory '$work/hf'" "$work/hfdir.log" || { cat "$work/hfdir.log"; fail "no hf:DIR message"; }
    [ "$(first_loss "$work/hfdir.jsonl")" = "$b" ] || fail "init_from=hf:DIR first loss $(first_loss "$work/hfdir.jsonl"), the weights file's $b"
    [ -z "$(ls -a "$work/ck-hf" | grep init_from-hf)" ] || fail "the converted weights file was left behind"
    # An input without the model's keys: they come from config.json, the run is the same bit for bit; a
    # key the input gives must agree with config.json, and one that does not is named.
    printf '[model]\nseq_length = 32\nglobal_batch_size = 4\nmicro_batch_size = 2\n[optimizer]\nlr = 1e-2\nmin_lr = 1e-3\nwarmup_iters = 0\n[data]\npath = %s\n' \
      "$work/d" > "$work/bare.ini"
    timeout 300 mpirun -np 1 "$dtrain" "$work/bare.ini" "${common[@]}" --checkpoint.dir="$work/ck-bare" \
      --checkpoint.init_from="hf:$work/hf" --model.hidden_size=64 --training.eval_interval=0 \
      --logging.metrics_file="$work/bare.jsonl" > "$work/bare.log" 2>&1 || { cat "$work/bare.log"; fail "init_from=hf:DIR without [model] keys"; }
    grep "^model: " "$work/bare.log" || fail "no note of the keys taken from config.json"
    grep -q "^model: \[model\] keys from '$work/hf/config.json': num_layers=4, num_attention_heads=8, ffn_hidden_size=176" "$work/bare.log" \
      || fail "the keys taken are not the ones the input left out"
    [ "$(first_loss "$work/bare.jsonl")" = "$b" ] || fail "without [model] keys: first loss $(first_loss "$work/bare.jsonl"), the weights file's $b"
    timeout 120 mpirun -np 2 "$dtrain" "$work/bare.ini" "${common[@]}" --checkpoint.dir="$work/ck-bare2" --checkpoint.init_from="hf:$work/hf" \
      --model.num_layers=3 --model.swiglu=false > "$work/bare-bad.log" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$work/bare-bad.log"; fail "a key unlike config.json's: exit $rc, expected 2"; }
    cat "$work/bare-bad.log"
    for k in "model.num_layers = 3 in the input, 4 in config.json" "model.swiglu = false in the input, true in config.json"; do
      grep -qF "$k" "$work/bare-bad.log" || fail "the error does not name '$k'"
    done
    timeout 120 mpirun -np 2 "$dtrain" "$work/llama.ini" "${common[@]}" --model.num_query_groups=4 > "$work/other.log" 2>&1
    rc=$?
    [ $rc -eq 2 ] || { cat "$work/other.log"; fail "another model: exit $rc, expected 2"; }
    grep -q "weights file '$work/imported.h5' was saved for another model" "$work/other.log" || { cat "$work/other.log"; fail "no model error"; }
    grep -q "model.num_query_groups = 2 in the weights file, 4 in this run" "$work/other.log" || { cat "$work/other.log"; fail "key not named"; } ;;
  bad_*)
    kind=${case_name#bad_}
    train llama
    args=()
    [ "$kind" = index_missing_tensor ] && args=(--max-shard-size 100KB)
    run_consolidate "$work/e.log" "$work/ck-llama" --export-hf "$work/hf" "${args[@]}"
    victim=$($reference damage "$kind" "$work/hf" "$work/bad") || fail "damage"
    timeout 60 "$consolidate" --import-hf "$work/bad" --out "$work/out.h5" > "$work/bad.log" 2>&1
    rc=$?
    cat "$work/bad.log"
    [ $rc -eq 2 ] || fail "exit $rc, expected 2"
    [ "$(grep -c 'ckpt-consolidate: error:' "$work/bad.log")" -eq 1 ] || fail "expected exactly one error line"
    grep -q "ckpt-consolidate: error: .*$victim" "$work/bad.log" || fail "the error does not name $victim"
    grep -q "$work/bad" "$work/bad.log" || fail "the error does not name the directory or file"
    case $kind in  # what the format's own reader also refuses, said as what it is
      trailing_bytes) why="trailing bytes" ;;
      gap) why="a gap in the data" ;;
      huge_shape) why="more bytes than 64 bits count" ;;
      nan) why="holds non-finite values (NaN or infinity)" ;;
      *) why="" ;;
    esac
    [ -z "$why" ] || grep -q "ckpt-consolidate: error: .*$why" "$work/bad.log" || fail "the error does not say '$why'"
    [ -z "$(ls -a "$work" | grep "^out\.h5")" ] || fail "a weights file was left behind: $(ls "$work")" ;;
  export_refusals)
    train gpt2
    mkdir -p "$work/full" && touch "$work/full/old.safetensors"
    expect() {  # expect MESSAGE ARGS...
      local msg=$1
      shift
      timeout 60 "$consolidate" "$@" > "$work/r.log" 2>&1
      local rc=$?
      [ $rc -eq 2 ] && grep -qF -- "$msg" "$work/r.log" || { cat "$work/r.log"; fail "ckpt-consolidate $*: exit $rc, expected 2 and '$msg'"; }
      echo "refused: $(cat "$work/r.log")"
    }
    expect "'$work/full' is not empty" "$work/ck-gpt2" --export-hf "$work/full"
    expect "--max-shard-size '5XB' is not a size" "$work/ck-gpt2" --export-hf "$work/new" --max-shard-size 5XB
    write_ini odd "num_attention_heads = 4" "normalization = RMSNorm"
    train odd --training.train_iters=1
    expect "is none of the Hugging Face families dtrain writes: GPT2LMHeadModel (" "$work/ck-odd" --export-hf "$work/new"
    [ ! -e "$work/new" ] || [ -z "$(ls -A "$work/new")" ] || fail "a refused export left files"
    # A NaN in one tensor, found by one of 3 ranks writing shards: every rank ends with exit 2, one error,
    # and none of the files the others wrote stays.
    cp "$work/ck-gpt2/model-final.h5" "$work/nan.h5"
    /usr/bin/python3 -c "import h5py, numpy as np; f = h5py.File('$work/nan.h5', 'r+'); f['h3.fc_w'][0, 0] = np.nan" || fail "h5py"
    timeout 120 mpirun -np 3 "$consolidate" "$work/nan.h5" --export-hf "$work/nan-hf" --max-shard-size 100KB > "$work/r.log" 2>&1
    rc=$?
    cat "$work/r.log"
    [ $rc -eq 2 ] || fail "export of a NaN: exit $rc, expected 2"
    [ "$(grep -c 'ckpt-consolidate: error:.*non-finite' "$work/r.log")" -eq 1 ] || fail "expected one error naming the non-finite tensor"
    [ -z "$(ls -A "$work/nan-hf")" ] || fail "a failed export left files: $(ls "$work/nan-hf")" ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS $case_name"

#!/usr/bin/env bash
# Checkpoint I/O in bounded memory: what each rank reads, what ckpt-consolidate and the final weights hold.
#   bounded_io.sh CASE DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE CKPT_READ_SHARE SOURCE_DIR
# Cases:
#   resume_reads_own_slices  a tp=2 dp=2 checkpoint (distributed optimizer) resumed on the same layout
#                        (bit-identical), on dp=4 with the distributed optimizer, tp=2 pp=2 and one rank
#                        (losses within reorder_tol 1024 1 of the uninterrupted run, as
#                        checkpoint_resume_other_layouts: the weight gradients' sums over 8 x 128 tokens);
#                        every resume reads at most 1.2x the state of the rank that reads the most for
#                        it; ckpt_read_share checks every rank of more layouts (ZeRO-2/3, bf16 master
#                        weights) against its state counted element by element, and that ZeRO-3 ranks
#                        write nothing outside their parameter ranges
#   init_from_reads_own_slices  checkpoint.init_from a weights file at tp=2 pp=2: each rank reads at most
#                        1.2x its state, and the first loss equals a one-rank start from the same file
#                        (within reorder_tol 512 0: one forward pass, tp splits the MLP's 512 inputs)
#   large_model_memory   a 92M-parameter model whose embedding (67 MB) is its largest tensor, trained at
#                        tp=2 dp=2 with ZeRO-3: writing model-final.h5 raises no rank's peak resident
#                        memory (VmHWM) by more than 1 MB; ckpt-consolidate --out peaks (/usr/bin/time)
#                        below 2 x the largest tensor + 100 MB, less than the model; both files hold the
#                        same values, bit for bit (h5py); with 1 GB a rank, the whole model does not fit
#                        beside rank 0's training state, and the closing sample says it was skipped
set -u
case_name=$1 dtrain=$2 tool=$3 consolidate=$4 read_share=$5 src=$6
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"

# train NP METRICS CKPT_DIR ARGS...: the small model, 4 steps, saves at 2 and 4, no text sample (ARGS may ask
# for one); every rank must exit 0.
train() {
  local np=$1 metrics=$2 dir=$3; shift 3
  timeout -k 5 240 mpirun -np "$np" "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --model.global_batch_size=8 \
    --model.micro_batch_size=2 --training.train_iters=4 --training.eval_interval=0 --logging.log_interval=1 "$smooth_adam" \
    "--logging.metrics_file=$metrics" "--checkpoint.dir=$dir" --checkpoint.save_interval=2 "$no_sample" "$given_peak" "$@" > "$work/last.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { cat "$work/last.log"; fail "training exited $rc"; }
}
# The x of "... the most for its state: A MB for B MB, 1.03x)" in the log line matching $1, at most 1.2.
check_ratio() {
  local line ratio
  line=$(grep -a "$1" "$work/last.log") || { cat "$work/last.log"; fail "no line '$1'"; }
  echo "  ${line#*; }"
  ratio=$(sed -n 's/.*for its state: .* MB for .* MB, \([0-9.]*\)x).*/\1/p' <<<"$line")
  [ -n "$ratio" ] || fail "no read ratio in: $line"
  awk -v r="$ratio" 'BEGIN { exit !(r <= 1.2) }' || fail "a rank read ${ratio}x its state"
}
tp2dp2=(--system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=1 --system.use_distributed_optimizer=true)

case $case_name in
  resume_reads_own_slices)
    train 4 "$work/ref.jsonl" "$work/ckA" "${tp2dp2[@]}"
    tol=$(reorder_tol 1024 1)
    for layout in "4 2 1 true 0" "4 1 1 true $tol" "4 2 2 false $tol" "1 1 1 false $tol"; do
      set -- $layout
      echo "resume at tp=$2 pp=$3 on $1 rank(s), distributed optimizer $4:"
      rm -f "$work/r.jsonl"
      train "$1" "$work/r.jsonl" "$work/ckR-$1-$2-$3" --system.tensor_model_parallel_size="$2" \
        --system.pipeline_model_parallel_size="$3" --system.use_distributed_optimizer="$4" "--checkpoint.load=$work/ckA/step_00000002"
      check_ratio "checkpoint: resumed from .*step_00000002 at step 2"
      compare_tail "$work/r.jsonl" "$5"
    done
    echo "every rank of more layouts, against its state counted element by element:"
    timeout -k 5 120 mpirun -np 4 "$read_share" "$work/ckA/step_00000002" tp=2,pp=1,zero=1 tp=1,pp=1,zero=1 tp=2,pp=2 \
      tp=1,pp=1,zero=3 tp=2,pp=1,zero=3,bf16=1 tp=1,pp=2,zero=2 tp=4,pp=1 tp=1,pp=4,zero=3 > "$work/share.log" 2>&1
    rc=$?
    sed 's/^/  /' "$work/share.log"
    [ $rc -eq 0 ] || fail "ckpt_read_share exited $rc"
    timeout -k 5 60 mpirun -np 1 "$read_share" "$work/ckA/step_00000004" tp=1,pp=1 tp=1,pp=1,zero=3,bf16=1 > "$work/share.log" 2>&1 ||
      { cat "$work/share.log"; fail "ckpt_read_share on one rank"; }
    sed 's/^/  /' "$work/share.log" ;;
  init_from_reads_own_slices)
    train 4 "$work/ref.jsonl" "$work/ckA" "${tp2dp2[@]}"
    first() { losses "$1" | head -n 1; }
    train 4 "$work/i4.jsonl" "$work/ckI4" --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=2 \
      "--checkpoint.init_from=$work/ckA/model-final.h5" --training.train_iters=1
    check_ratio "checkpoint: initialised the model from"
    train 1 "$work/i1.jsonl" "$work/ckI1" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      "--checkpoint.init_from=$work/ckA/model-final.h5" --training.train_iters=1
    check_ratio "checkpoint: initialised the model from"
    echo "  first loss: tp=2 pp=2 $(first "$work/i4.jsonl"), one rank $(first "$work/i1.jsonl")"
    awk -v a="$(first "$work/i4.jsonl")" -v b="$(first "$work/i1.jsonl")" -v tol="$(reorder_tol 512 0)" \
      'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d / b <= tol) }' ||
      fail "the first losses differ" ;;
  large_model_memory)
    big=(--model.vocab_size=16384 --model.hidden_size=1024 --model.num_attention_heads=8 --model.num_layers=6 --model.seq_length=32
         --model.global_batch_size=4 --model.micro_batch_size=1 --training.train_iters=1 --checkpoint.save_interval=1
         --system.zero_stage=3 --system.memory_budget_gb=1 --logging.sample_tokens=240)
    train 4 "$work/big.jsonl" "$work/ckB" "${tp2dp2[@]}" "${big[@]}"
    line=$(grep -a '^memory: ' "$work/last.log") || { cat "$work/last.log"; fail "no memory line"; }
    echo "  $line"
    grown=$(sed -n "s/.*raised no rank's peak by more than \([0-9.]*\) MB.*/\1/p" <<<"$line")
    awk -v g="$grown" 'BEGIN { exit !(g != "" && g <= 1.0) }' || fail "writing the final weights raised a rank's peak by $grown MB"
    grep -a '^sample: skipped: the whole model needs .* GB on rank 0 to generate with, beside its .* GB of training state, more than the 1.000 GB a rank may use (system.memory_budget_gb=1' \
      "$work/last.log" || fail "the sample was not skipped with a reason"
    /usr/bin/time -v "$consolidate" "$work/ckB" --out "$work/C.h5" > /dev/null 2> "$work/time.log" || { cat "$work/time.log"; fail "consolidate"; }
    peak_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.log")
    /usr/bin/python3 - "$work/C.h5" "$work/ckB/model-final.h5" "$peak_kb" <<'PY' || fail "consolidate's memory or the files"
import sys, h5py
c, f, peak = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), int(sys.argv[3]) * 1024
names = sorted(c.keys())
assert names == sorted(f.keys()), "the files hold different tensors"
sizes = {n: c[n].size * 4 for n in names}
largest, total = max(sizes.values()), sum(sizes.values())
bound = 2 * largest + 100e6
print("  model %.1f MB, largest tensor %s %.1f MB; ckpt-consolidate --out peaked at %.1f MB (bound %.1f MB)"
      % (total / 1e6, max(sizes, key=sizes.get), largest / 1e6, peak / 1e6, bound / 1e6))
assert max(sizes, key=sizes.get) == "wte" and total > bound + 50e6, "the model does not make the bound telling"
assert peak <= bound, "ckpt-consolidate --out held more than 2 x its largest tensor + 100 MB"
for n in names:
    a, b = c[n][...], f[n][...]
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), n
print("  h5py: model-final.h5 and the consolidated checkpoint hold the same %d tensors bit for bit" % len(names))
PY
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS

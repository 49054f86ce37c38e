#!/usr/bin/env bash
# Checkpoints as users meet them, on a small model and text made here.
#   checkpoint.sh CASE DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE SOURCE_DIR
# Cases:
#   resume_same_layout   tp=2 pp=2 dp=2 + distributed optimizer: 4 steps vs 2 steps + resume: bit-identical,
#                        also resumed under zb-h1 (the split backward sums in 1F1B's order)
#   cp_across_layouts    a cp=2 dp=2 checkpoint resumed bit for bit on cp=2 dp=2, and at cp=1 dp=4, cp=4 dp=1
#                        and cp=1 on one rank (within $resumed_tol)
#   resume_other_layouts the step-2 checkpoint resumed at tp1/pp4/dp2, tp4/pp1/dp2, tp1/pp1/dp1, directly
#                        and via --reshard, on uneven stages (1 + 3 blocks), whose own checkpoint resumes
#                        on one rank, and at tp1/pp2/dp2 under zbv: losses of steps 3-4 within $resumed_tol of
#                        the uninterrupted run
#   cp_ep_across_layouts a Qwen3-MoE-like cp=2 ep=2 checkpoint (qk norms, kv_channels, a window, renormalised
#                        routing) resumed at cp=1 ep=4 and cp=4 ep=1 ($resumed_tol)
#   moe_other_ep         a MoE model (4 experts, top-2) at ep=2 dp=4 with the distributed optimizer: its step-2
#                        checkpoint (expert tensors written by their slices' owners over the expert-data-
#                        parallel group) resumes at ep=4 and at ep=1, directly and through --reshard ep=N,
#                        with losses within $resumed_tol of the uninterrupted run (fp32; layouts differ by
#                        summation order)
#   zero3_across_stages  ZeRO-3 follows ZeRO-1 (reordered micro-batch sums); its checkpoint resumes exactly on
#                        ZeRO-3, on ZeRO-1 and on another layout; a ZeRO-1 checkpoint resumes on ZeRO-3 and
#                        ZeRO-2 elsewhere
#   offload_across_layouts  system.offload_optimizer at tp=2 pp=2 dp=2 (ZeRO-1), and with system.offload_params on
#                        ZeRO-3: the same losses and checkpoints (weights and moments, consolidated) as without
#                        it; an offloaded checkpoint resumes bit for bit with offload, and without it on another
#                        layout, and a plain one resumes with both offloads on ZeRO-3 elsewhere ($resumed_tol)
#   bf16_resume_same_layout  the same in bf16: bit-identical
#   freeze_resume        training.freeze in bf16 at tp=2 pp=2 dp=2 (and fp32 ZeRO-3): resumes bit for bit, the
#                        frozen tensors do not move and have no optimizer state, another training.freeze is
#                        refused on resume
#   bf16_other_precision_and_layout  a bf16 checkpoint resumes in fp32 and in bf16 on another layout; an fp32
#                        checkpoint resumes in bf16
#   consolidate_bf16     --dtype bf16 writes every weight rounded to nearest even (checked with numpy), h5dump
#                        reads it; a bf16 run's checkpoint survives --reshard bitwise; --dtype fp16 writes
#                        numpy's float16 rounding (h5py), an unknown --dtype is one clear error, a dataset
#                        h5py declared but never wrote is refused by name (not read as zeros)
#   roundtrip            consolidate(reshard(C, Y)) == consolidate(C) bitwise for several Y; h5dump and
#                        h5py read the consolidated tensors by name with their global shapes
#   kill_during_save     a rank SIGKILLed inside the second save: the job ends, latest still names the
#                        first checkpoint, it verifies, and the next run cleans up and resumes from it;
#                        a rank SIGKILLed right after a save is published: the metrics file has that step
#   corrupt_byte | truncated_shard | missing_shard | foreign_manifest
#                        a damaged checkpoint: resume and --verify fail with an error naming the file
#   bad_hex_id | bad_hex_checksum
#                        a manifest whose checkpoint id or a shard checksum is not hex: one error naming the
#                        manifest on every rank (exit 2), and --verify says the same (no abort)
#   blank_latest         an empty `latest` with checkpoint.load=auto is an error naming it, never a fresh start
#   other_model          resuming a 4-layer, 4-head checkpoint with num_layers=2 or num_attention_heads=8 is an
#                        error naming every model key that differs
#   fresh_run_in_used_dir  load=none in a directory holding later steps of another run: the new save is latest,
#                        pruning (by publication order) keeps it, it verifies and resumes
#   keep_last            only the newest keep_last checkpoints stay, latest names the newest
#   disk_full            a save on a full filesystem fails cleanly on every rank (exit 2, no crash); the last
#                        checkpoint still loads
#   final_weights_disk_full  model-final.h5 on a full filesystem: one error, no HDF5 stack, no temporary left
#   consolidate_disk_full  ckpt-consolidate --out on a full filesystem under mpirun: exit 2 on every rank, nothing left
#   metrics_disk_full    a metrics file that cannot be written is one warning; training completes
set -u
case_name=$1 dtrain=$2 tool=$3 consolidate=$4 src=$5
here=$(dirname "$0")
source "$here/lib.sh"
on_exit+=('mountpoint -q "$work/small" 2>/dev/null && umount "$work/small"')
make_small_data "$tool"
# Tolerances (see reorder_tol in lib.sh). A layout reorders sums of at most the global batch's 8 x 128 =
# 1024 tokens (a weight gradient's; the MLP's 512 inputs, the 128 keys of a row and the 256-entry
# vocabulary are shorter): a resumed run's steps 3-4 within reorder_tol 1024 1 = 2.4e-4 of the
# uninterrupted run. A run that did not load its checkpoint is 2e-2 off at step 3.
resumed_tol=$(reorder_tol 1024 1)

# train NP METRICS CKPT_DIR ARGS...: the small model; every rank must exit 0 unless ALLOW_FAIL=1.
train() {
  local np=$1 metrics=$2 dir=$3; shift 3
  timeout -k 5 120 mpirun -np "$np" "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --model.global_batch_size=8 \
    --model.micro_batch_size=2 --training.train_iters=4 --training.eval_interval=0 --logging.log_interval=1 "$smooth_adam" "$no_sample" "$given_peak" \
    "--logging.metrics_file=$metrics" "--checkpoint.dir=$dir" --checkpoint.save_interval=2 --checkpoint.keep_last=4 "$@" \
    > "$work/last.log" 2>&1
  local rc=$?
  [ "${ALLOW_FAIL:-0}" = 1 ] || [ $rc -eq 0 ] || { cat "$work/last.log"; fail "training exited $rc"; }
  return $rc
}
# train_exit_codes NP ARGS...: like train, but every rank runs to its own end and the exit codes of all
# ranks are printed as "rank-exit R CODE"; returns 0 when every rank exited 2 (one clear error).
train_exit_codes() {
  local np=$1; shift
  OMPI_MCA_orte_abort_on_non_zero_status=0 timeout -k 5 120 mpirun -np "$np" bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ \
    "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --model.global_batch_size=8 --model.micro_batch_size=2 \
    --training.train_iters=4 --training.eval_interval=0 --logging.log_interval=1 --checkpoint.save_interval=2 "$no_sample" "$given_peak" \
    --checkpoint.keep_last=4 "$@" > "$work/last.log" 2>&1
  cat "$work/last.log" | grep -v '^step'
  [ "$(grep -c "^rank-exit [0-9]* 2$" "$work/last.log")" -eq "$np" ]
}
big=(--system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=2 --system.use_distributed_optimizer=true)

# The uninterrupted reference run at tp=2 pp=2 dp=2: checkpoints at steps 2 and 4 (reference bf16: in
# bf16, into ckA16 with metrics ref16.jsonl).
reference() {
  local precision=${1:-fp32} suffix=${1:+16}
  train 8 "$work/ref$suffix.jsonl" "$work/ckA$suffix" "${big[@]}" "--system.precision=$precision"
  [ "$(losses "$work/ref$suffix.jsonl" | wc -l)" -eq 4 ] || fail "reference run logged $(losses "$work/ref$suffix.jsonl" | wc -l) steps"
}

damaged_copy() {  # a copy of the step-4 checkpoint to damage
  reference
  mkdir -p "$work/bad"
  cp -r "$work/ckA/step_00000004" "$work/bad/"
  echo step_00000004 > "$work/bad/latest"
}

expect_load_error() {  # expect_load_error EXPECTED: resume and verify both refuse with EXPECTED (exit 2, no crash)
  ALLOW_FAIL=1 train 2 "$work/x.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
  local rc=$?
  cat "$work/last.log"
  [ $rc -eq 2 ] || fail "resuming from a damaged checkpoint exited $rc, not 2"
  grep -q "dtrain: error: .*$1" "$work/last.log" || fail "resume error does not say '$1'"
  "$consolidate" "$work/bad" --verify > "$work/verify.log" 2>&1
  rc=$?
  cat "$work/verify.log"
  [ $rc -eq 2 ] || fail "--verify of a damaged checkpoint exited $rc, not 2"
  grep -q "ckpt-consolidate: error: .*$1" "$work/verify.log" || fail "--verify error does not say '$1'"
}

case $case_name in
  resume_same_layout)
    reference
    train 8 "$work/resumed.jsonl" "$work/ckB" "${big[@]}" "--checkpoint.load=$work/ckA/step_00000002"
    grep -q "resumed from .*step_00000002 at step 2" "$work/last.log" || fail "no resume message"
    compare_tail "$work/resumed.jsonl" 0
    # The zero-bubble H1 schedule splits every backward into B and W but adds each gradient's
    # micro-batches in 1F1B's order: the same layout resumed on it is bit for bit the 1F1B run.
    echo "resumed on the same layout with system.pipeline_schedule=zb-h1:"
    rm -f "$work/resumed.jsonl"
    train 8 "$work/resumed.jsonl" "$work/ckZ" "${big[@]}" --system.pipeline_schedule=zb-h1 "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/resumed.jsonl" 0 ;;
  resume_other_layouts)
    reference
    for layout in "8 1 4 1" "8 4 1 1" "1 1 1 1" "8 2 2 2"; do
      set -- $layout
      extra=()
      [ "$4" -gt 1 ] && extra=(--system.pipeline_schedule=interleaved --system.virtual_pipeline_model_parallel_size="$4")
      for via in direct reshard; do
        from=$work/ckA/step_00000002
        if [ $via = reshard ]; then
          rm -rf "$work/rs"
          "$consolidate" "$from" --reshard "tp=$2,pp=$3,dp=$(( $1 / ($2 * $3) )),v=$4" --out "$work/rs" > /dev/null || fail "reshard"
          from=$work/rs/step_00000002
        fi
        echo "resume at tp=$2 pp=$3 v=$4 on $1 ranks, without the distributed optimizer ($via):"
        rm -f "$work/r.jsonl"
        train "$1" "$work/r.jsonl" "$work/ckR-$1-$2-$via" --system.tensor_model_parallel_size="$2" \
          --system.pipeline_model_parallel_size="$3" "${extra[@]}" "--checkpoint.load=$from"
        compare_tail "$work/r.jsonl" "$resumed_tol"
      done
    done
    # Uneven pipeline stages (1 + 3 blocks on pp 2): the even run's checkpoint resumes on them, and a
    # run on them writes a checkpoint that resumes on one rank.
    echo "resume at tp=2 pp=2 with 1 + 3 blocks on 4 ranks:"
    rm -f "$work/r.jsonl"
    uneven=(--system.pipeline_first_stage_layers=1 --system.pipeline_last_stage_layers=3)
    train 4 "$work/r.jsonl" "$work/ckU1" "${uneven[@]}" "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r.jsonl" "$resumed_tol"
    echo "resume at tp=1 pp=2 dp=2 with zbv (two chunks a stage in a V, the head on stage 0) on 4 ranks:"
    rm -f "$work/r.jsonl"
    train 4 "$work/r.jsonl" "$work/ckV" --system.tensor_model_parallel_size=1 --system.pipeline_schedule=zbv \
      --system.virtual_pipeline_model_parallel_size=2 --system.use_distributed_optimizer=true "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r.jsonl" "$resumed_tol"
    echo "an uneven run's step-2 checkpoint resumed on one rank:"
    train 4 "$work/u.jsonl" "$work/ckU2" "${uneven[@]}"
    rm -f "$work/r.jsonl"
    train 1 "$work/r.jsonl" "$work/ckU3" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      "--checkpoint.load=$work/ckU2/step_00000002"
    compare_tail "$work/r.jsonl" "$resumed_tol" ;;
  cp_across_layouts)
    # Context parallelism is one more layout axis: a cp=2 dp=2 checkpoint (distributed optimizer)
    # resumes at cp=1 dp=4, cp=4 dp=1 and on one rank, losses within $resumed_tol of the uninterrupted run
    # (fp32; the online softmax sums in another order than the whole-row softmax). T = 128 = 8 chunks of
    # 16 at cp=4; 4 heads of 2 groups, rotary positions (global positions per chunk).
    cp_model=(--model.position_embedding_type=rope --model.group_query_attention=true --model.num_query_groups=2)
    train 4 "$work/ref.jsonl" "$work/ckA" "${cp_model[@]}" --system.context_parallel_size=2 \
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --system.use_distributed_optimizer=true
    grep -q "tp=1 cp=2 pp=1 dp=2" "$work/last.log" || { cat "$work/last.log"; fail "the reference run is not cp=2 dp=2"; }
    "$consolidate" "$work/ckA" --verify > /dev/null || fail "--verify refused the cp=2 checkpoint"
    # The same layout resumes bit for bit (tolerance 0); the others within $resumed_tol.
    for layout in "4 2 0" "4 1 $resumed_tol" "4 4 $resumed_tol" "1 1 $resumed_tol"; do
      set -- $layout
      echo "cp=2 dp=2 checkpoint resumed at cp=$2 on $1 ranks:"
      rm -f "$work/r.jsonl"
      train "$1" "$work/r.jsonl" "$work/ckR-$1-$2" "${cp_model[@]}" --system.context_parallel_size="$2" \
        --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --system.use_distributed_optimizer=true \
        "--checkpoint.load=$work/ckA/step_00000002"
      compare_tail "$work/r.jsonl" "$3"
    done ;;
  cp_ep_across_layouts)
    # Context and expert parallelism together: a Qwen3-MoE-like model (4 experts, top-2 renormalised,
    # dropless, load-balancing loss 1e-2; RMSNorm, each head's queries and keys normalised, heads of 48
    # dims at hidden 128, a window of 40 keys) at cp=2 dp=2 ep=2 with the distributed optimizer; its
    # step-2 checkpoint (the heads' norm weights included) resumes at cp=1 dp=4 ep=4 and at cp=4 dp=1
    # ep=1, losses within $resumed_tol of the uninterrupted run.
    moe=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --model.num_experts=4
         --model.moe_router_topk=2 --model.moe_aux_loss_coeff=1e-2 --model.position_embedding_type=rope
         --model.normalization=RMSNorm --model.qk_layernorm=true --model.kv_channels=48 --model.window_size=40
         --model.moe_router_pre_softmax=false --system.use_distributed_optimizer=true)
    train 4 "$work/ref.jsonl" "$work/ckA" "${moe[@]}" --system.context_parallel_size=2 --system.expert_model_parallel_size=2
    grep -q "tp=1 cp=2 pp=1 dp=2" "$work/last.log" || { cat "$work/last.log"; fail "the reference run is not cp=2 dp=2"; }
    for layout in "1 4" "4 1"; do
      set -- $layout
      echo "cp=2 ep=2 checkpoint resumed at cp=$1 ep=$2:"
      rm -f "$work/r.jsonl"
      train 4 "$work/r.jsonl" "$work/ckR-$1-$2" "${moe[@]}" --system.context_parallel_size="$1" \
        --system.expert_model_parallel_size="$2" "--checkpoint.load=$work/ckA/step_00000002"
      compare_tail "$work/r.jsonl" "$resumed_tol"
    done ;;
  moe_other_ep)
    moe=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --model.num_experts=4
         --model.moe_router_topk=2 --system.use_distributed_optimizer=true)
    train 4 "$work/ref.jsonl" "$work/ckA" "${moe[@]}" --system.expert_model_parallel_size=2
    [ "$(losses "$work/ref.jsonl" | wc -l)" -eq 4 ] || fail "reference run logged $(losses "$work/ref.jsonl" | wc -l) steps"
    for ep in 4 1; do
      for via in direct reshard; do
        from=$work/ckA/step_00000002
        if [ $via = reshard ]; then
          rm -rf "$work/rs"
          "$consolidate" "$from" --reshard "tp=1,pp=1,dp=4,ep=$ep,zero=1" --out "$work/rs" > /dev/null || fail "reshard to ep=$ep"
          from=$work/rs/step_00000002
        fi
        echo "ep=2 checkpoint resumed at ep=$ep ($via):"
        rm -f "$work/r.jsonl"
        train 4 "$work/r.jsonl" "$work/ckR-$ep-$via" "${moe[@]}" --system.expert_model_parallel_size=$ep "--checkpoint.load=$from"
        compare_tail "$work/r.jsonl" "$resumed_tol"
      done
    done ;;
  zero3_across_stages)
    # ZeRO-3 trains as ZeRO-1 does, but with 2 micro-batches per rank it adds each gradient's m x dp =
    # 4 micro-batch sums in another order, a reordering of its sum over the step's 1024 tokens (n as
    # test_layouts.cpp takes it, which covers how much the sums cancel): steps 3-4 follow 2-3 such
    # updates, reorder_tol 1024 3. It writes the same kind of pieces (each owner its slices of the
    # parameters): its checkpoint resumes bit for bit on ZeRO-3, on ZeRO-1 (the weights of its 2 steps
    # reordered, then one step more: reorder_tol 1024 3), on other layouts within $resumed_tol, and a
    # ZeRO-1 checkpoint resumes on ZeRO-3 and ZeRO-2 elsewhere.
    reference
    train 8 "$work/z3.jsonl" "$work/ckZ3" "${big[@]}" --system.zero_stage=3
    echo "ZeRO-3 from the start against ZeRO-1:"
    compare_tail <(grep -o '"loss": [0-9.e+-]*' "$work/z3.jsonl" | tail -n 2) "$(reorder_tol 1024 3)"
    "$consolidate" "$work/ckZ3" --verify > /dev/null || fail "--verify refused the ZeRO-3 checkpoint"
    # The checkpoint records the stage it was saved with (zero_stage); the layout says so.
    "$consolidate" "$work/ckZ3" --info | grep -q "layout tp=2 cp=1 pp=2 dp=2 ep=1 v=1 zero=3," || fail "--info does not say zero=3"
    # A checkpoint from before zero_stage was recorded (the attribute deleted, h5py: the file keeps its
    # size) reads as the distributed optimizer's stage 1.
    cp -r "$work/ckZ3" "$work/old"
    /usr/bin/python3 -c "import glob, h5py
for path in glob.glob('$work/old/step_00000004/*.h5'):
    with h5py.File(path, 'r+') as f: del f.attrs['zero_stage']" || fail "h5py could not edit the shards"
    "$consolidate" "$work/old" --info | grep -q "layout tp=2 cp=1 pp=2 dp=2 ep=1 v=1 zero=1," || fail "an older checkpoint is not read as zero=1"
    echo "ZeRO-3 checkpoint resumed on ZeRO-3, same layout:"
    train 8 "$work/r0.jsonl" "$work/ckR0" "${big[@]}" --system.zero_stage=3 "--checkpoint.load=$work/ckZ3/step_00000002"
    compare_tail "$work/r0.jsonl" 0 "$work/z3.jsonl"
    echo "ZeRO-3 checkpoint resumed on ZeRO-1, same layout:"
    train 8 "$work/r1.jsonl" "$work/ckR1" "${big[@]}" "--checkpoint.load=$work/ckZ3/step_00000002"
    grep -q "saved on tp=2 cp=1 pp=2 dp=2 ep=1 v=1 zero=3)" "$work/last.log" || fail "the resume does not name the saved layout"
    compare_tail "$work/r1.jsonl" "$(reorder_tol 1024 3)"
    echo "ZeRO-3 checkpoint resumed on ZeRO-3 at tp=1 pp=1 dp=4:"
    train 4 "$work/r2.jsonl" "$work/ckR2" --system.use_distributed_optimizer=true --system.zero_stage=3 \
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 "--checkpoint.load=$work/ckZ3/step_00000002"
    compare_tail "$work/r2.jsonl" "$resumed_tol"
    echo "ZeRO-1 checkpoint resumed on ZeRO-3 at tp=1 pp=2 dp=4 and on ZeRO-2 at tp=2 pp=1 dp=4:"
    train 8 "$work/r3.jsonl" "$work/ckR3" --system.use_distributed_optimizer=true --system.zero_stage=3 \
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r3.jsonl" "$resumed_tol"
    train 8 "$work/r4.jsonl" "$work/ckR4" --system.use_distributed_optimizer=true --system.zero_stage=2 \
      --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=1 "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r4.jsonl" "$resumed_tol" ;;
  offload_across_layouts)
    # Offload runs the same AdamW arithmetic on host copies: the same bits. Consolidated with the
    # optimizer state, a checkpoint with offload equals one without (the root attributes name the run).
    reference
    train 8 "$work/off.jsonl" "$work/ckO" "${big[@]}" --system.offload_optimizer=true
    compare_tail <(grep -o '"loss": [0-9.e+-]*' "$work/off.jsonl" | tail -n 2) 0
    for stage in 1 3; do
      [ $stage = 3 ] && { train 8 "$work/z3.jsonl" "$work/ckZ" "${big[@]}" --system.zero_stage=3;
                          train 8 "$work/z3off.jsonl" "$work/ckZO" "${big[@]}" --system.zero_stage=3 --system.offload_optimizer=true \
                            --system.offload_params=true; }
      plain=$work/ckA off=$work/ckO
      [ $stage = 3 ] && plain=$work/ckZ off=$work/ckZO
      for t in 2 4; do
        "$consolidate" "$plain/step_0000000$t" --out "$work/P$t.h5" --optimizer > /dev/null || fail "consolidate ZeRO-$stage step $t"
        "$consolidate" "$off/step_0000000$t" --out "$work/O$t.h5" --optimizer > /dev/null || fail "consolidate offloaded ZeRO-$stage step $t"
        h5diff --exclude-attribute / "$work/P$t.h5" "$work/O$t.h5" > "$work/diff.txt" ||
          { head "$work/diff.txt"; fail "ZeRO-$stage step $t: the offloaded run's checkpoint differs"; }
        echo "  ZeRO-$stage step $t: with offload the same weights and moments"
      done
    done
    echo "offloaded checkpoint resumed with offload, same layout:"
    train 8 "$work/r0.jsonl" "$work/ckR0" "${big[@]}" --system.offload_optimizer=true "--checkpoint.load=$work/ckO/step_00000002"
    compare_tail "$work/r0.jsonl" 0
    echo "offloaded checkpoint resumed without offload at tp=1 pp=1 dp=4:"
    train 4 "$work/r1.jsonl" "$work/ckR1" --system.use_distributed_optimizer=true --system.tensor_model_parallel_size=1 \
      --system.pipeline_model_parallel_size=1 "--checkpoint.load=$work/ckO/step_00000002"
    compare_tail "$work/r1.jsonl" "$resumed_tol"
    echo "plain checkpoint resumed with optimizer and parameter offload on ZeRO-3 at tp=1 pp=2 dp=4:"
    train 8 "$work/r2.jsonl" "$work/ckR2" --system.use_distributed_optimizer=true --system.zero_stage=3 --system.offload_optimizer=true \
      --system.offload_params=true \
      --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r2.jsonl" "$resumed_tol" ;;
  bf16_resume_same_layout)
    reference bf16
    train 8 "$work/resumed.jsonl" "$work/ckB" "${big[@]}" --system.precision=bf16 "--checkpoint.load=$work/ckA16/step_00000002"
    grep -q "resumed from .*step_00000002 at step 2" "$work/last.log" || fail "no resume message"
    compare_tail "$work/resumed.jsonl" 0 "$work/ref16.jsonl" ;;
  freeze_resume)
    # training.freeze in bf16 at tp=2 pp=2 dp=2 with the distributed optimizer: frozen tensors have no
    # master weights or moments and are written whole from the parameters; stage 0 (the embedding and
    # blocks 0-1) is frozen whole, so its ranks have no optimizer state at all. The step-2 checkpoint resumes
    # bit for bit; the frozen tensors are equal at steps 2 and 4 while the others moved; --optimizer
    # consolidation has moments of the trainable tensors only; under ZeRO-3 (fp32) too the checkpoint
    # resumes bit for bit; another training.freeze is refused on resume (on another layout), naming both.
    frozen=--training.freeze=wte,wpe,h0.*,h1.*,lnf_b
    train 8 "$work/ref16.jsonl" "$work/ckA16" "${big[@]}" --system.precision=bf16 "$frozen"
    train 8 "$work/resumed.jsonl" "$work/ckB" "${big[@]}" --system.precision=bf16 "$frozen" "--checkpoint.load=$work/ckA16/step_00000002"
    grep -q "resumed from .*step_00000002 at step 2" "$work/last.log" || fail "no resume message"
    compare_tail "$work/resumed.jsonl" 0 "$work/ref16.jsonl"
    for t in 2 4; do
      "$consolidate" "$work/ckA16/step_0000000$t" --out "$work/F$t.h5" --optimizer > /dev/null || fail "consolidating step $t"
    done
    /usr/bin/python3 - "$work/F2.h5" "$work/F4.h5" <<'PY' || fail "the frozen tensors moved, or their optimizer state exists"
import fnmatch, sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = [n for n in a if n != "optimizer"]
frozen = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in ("wte", "wpe", "h0.*", "h1.*", "lnf_b"))]
assert len(frozen) == 2 + 2 * 12 + 1, frozen
for n in names:
    same = np.array_equal(a[n][()], b[n][()])
    assert same == (n in frozen), (n, "frozen" if n in frozen else "trainable", "unchanged" if same else "changed")
assert sorted(a["optimizer/exp_avg"]) == sorted(set(names) - set(frozen)), sorted(a["optimizer/exp_avg"])
print(f"  {len(frozen)} frozen tensors equal at steps 2 and 4, {len(names) - len(frozen)} trained; moments of the trained ones only")
PY
    # ZeRO-3 (pp=2 dp=2) shards the trainable tensors and keeps the frozen ones whole: its checkpoint
    # resumes bit for bit.
    z3=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 --system.use_distributed_optimizer=true
        --system.zero_stage=3 "$frozen")
    train 4 "$work/z3.jsonl" "$work/ckZ" "${z3[@]}"
    train 4 "$work/z3r.jsonl" "$work/ckZr" "${z3[@]}" "--checkpoint.load=$work/ckZ/step_00000002"
    compare_tail "$work/z3r.jsonl" 0 "$work/z3.jsonl"
    ALLOW_FAIL=1 train 2 "$work/x.jsonl" "$work/ckC" --system.tensor_model_parallel_size=1 --system.precision=bf16 \
      --training.freeze=wte,wpe "--checkpoint.load=$work/ckA16/step_00000002"
    [ $? -eq 2 ] || { cat "$work/last.log"; fail "a resume with another training.freeze did not exit 2"; }
    grep -q "was saved with training.freeze='wte,wpe,h0.\*,h1.\*,lnf_b' and this run has 'wte,wpe'" "$work/last.log" ||
      { cat "$work/last.log"; fail "no error naming both training.freeze values"; } ;;
  fp8_resume_same_layout)
    # fp8's current scaling takes each tensor's scale from its amax at the step that uses it: nothing
    # but the weights and moments carries over, so its checkpoint (fp32 master weights and moments, as
    # bf16's) resumes bit for bit. The fp8 run is not a bf16 run: their losses differ.
    train 8 "$work/ref8.jsonl" "$work/ckA8" "${big[@]}" --system.precision=fp8
    train 8 "$work/resumed.jsonl" "$work/ckB" "${big[@]}" --system.precision=fp8 "--checkpoint.load=$work/ckA8/step_00000002"
    grep -q "resumed from .*step_00000002 at step 2" "$work/last.log" || fail "no resume message"
    compare_tail "$work/resumed.jsonl" 0 "$work/ref8.jsonl"
    reference bf16
    paste <(losses "$work/ref8.jsonl") <(losses "$work/ref16.jsonl")
    [ "$(losses "$work/ref8.jsonl" | tail -n 3)" != "$(losses "$work/ref16.jsonl" | tail -n 3)" ] || fail "fp8 trained as bf16" ;;
  bf16_other_precision_and_layout)
    # The bf16 checkpoint holds fp32 master weights: it resumes in fp32 and in bf16 on another layout,
    # and an fp32 checkpoint resumes in bf16, each within bf16's resolution 2^-8 of the reference
    # (bf16_resolution: the two runs differ by bf16 rounding of what they store), while a run that did
    # not load is 2e-2 off at step 3.
    reference bf16
    reference
    echo "bf16 checkpoint, resumed in fp32 on 1 rank:"
    train 1 "$work/r1.jsonl" "$work/ckR1" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      --system.precision=fp32 "--checkpoint.load=$work/ckA16/step_00000002"
    compare_tail "$work/r1.jsonl" "$bf16_resolution" "$work/ref16.jsonl"
    echo "bf16 checkpoint, resumed in bf16 at tp=1 pp=4 dp=2:"
    train 8 "$work/r2.jsonl" "$work/ckR2" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=4 \
      --system.precision=bf16 "--checkpoint.load=$work/ckA16/step_00000002"
    compare_tail "$work/r2.jsonl" "$bf16_resolution" "$work/ref16.jsonl"
    echo "fp32 checkpoint, resumed in bf16 at tp=2 pp=1 dp=4 with the distributed optimizer:"
    train 8 "$work/r3.jsonl" "$work/ckR3" --system.tensor_model_parallel_size=2 --system.pipeline_model_parallel_size=1 \
      --system.use_distributed_optimizer=true --system.precision=bf16 "--checkpoint.load=$work/ckA/step_00000002"
    compare_tail "$work/r3.jsonl" "$bf16_resolution" ;;
  consolidate_bf16)
    # --dtype bf16 rounds the (fp32 master) weights to nearest even, checked against numpy's own rounding
    # of the fp32 file; resharding a bf16 run's checkpoint keeps every value.
    reference bf16
    "$consolidate" "$work/ckA16" --out "$work/F.h5" --optimizer > /dev/null || fail "consolidate fp32"
    mpirun -np 2 "$consolidate" "$work/ckA16" --out "$work/B.h5" --dtype bf16 > /dev/null || fail "consolidate --dtype bf16"
    h5dump -H -d /wte "$work/B.h5" | grep -q '16-bit little-endian floating-point' || fail "h5dump: wte is not a 16-bit float"
    /usr/bin/python3 - "$work/F.h5" "$work/B.h5" <<'PY' || fail "the bf16 file is not the fp32 file rounded to bf16"
import sys, h5py, numpy as np
f, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert "optimizer" not in b
for name in [k for k in f.keys() if k != "optimizer"]:
    x = f[name][...]
    assert b[name].shape == x.shape, name
    u = x.view(np.uint32).astype(np.uint64)
    rne = (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert np.array_equal(b[name].astype("f4")[...], rne), name
print("h5py: %d tensors in bf16, each the round-to-nearest-even of the fp32 value" % (len(f.keys()) - 1))
PY
    rm -rf "$work/rs"
    "$consolidate" "$work/ckA16" --reshard "tp=1,pp=1,dp=2,zero=1" --out "$work/rs" > /dev/null || fail "reshard"
    "$consolidate" "$work/rs" --out "$work/R.h5" --optimizer > /dev/null || fail "consolidate of the resharded checkpoint"
    h5diff "$work/F.h5" "$work/R.h5" > "$work/diff.txt" || { head "$work/diff.txt"; fail "consolidate(reshard(C)) differs"; }
    # --dtype fp16: IEEE half datasets that h5py reads as numpy's float16, each value numpy's own rounding.
    "$consolidate" "$work/ckA16" --out "$work/H.h5" --dtype fp16 > /dev/null || fail "consolidate --dtype fp16"
    /usr/bin/python3 - "$work/F.h5" "$work/H.h5" <<'PY' || fail "the fp16 file is not the fp32 file rounded to float16"
import sys, h5py, numpy as np
f, h = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = [k for k in f.keys() if k != "optimizer"]
for name in names:
    assert h[name].dtype == np.float16, (name, h[name].dtype)
    assert np.array_equal(h[name][...].view(np.uint16), f[name][...].astype(np.float16).view(np.uint16)), name
print("h5py: %d tensors in float16, each numpy's float16 rounding of the fp32 value" % len(names))
PY
    # A weight beyond float16's range (65504) is refused by name, and no export is left.
    cp "$work/F.h5" "$work/big.h5"
    /usr/bin/python3 -c "import h5py; f = h5py.File('$work/big.h5', 'r+'); f['wte'][0, 0] = 1e5" || fail "h5py"
    "$consolidate" "$work/big.h5" --export-hf "$work/big-hf" --dtype fp16 > "$work/big.log" 2>&1 && fail "an fp16 export of 1e5 was accepted"
    grep -q "beyond float16's range (65504)" "$work/big.log" || { cat "$work/big.log"; fail "no error naming float16's range"; }
    [ -z "$(ls "$work/big-hf" 2>/dev/null)" ] || fail "a refused fp16 export left files"
    # A dataset with the right shape that was never written (h5py: no storage; HDF5 would read it as
    # zeros) is refused by name, not exported as zero weights.
    cp "$work/F.h5" "$work/hollow.h5"
    /usr/bin/python3 -c "import h5py; f = h5py.File('$work/hollow.h5', 'r+'); s = f['wte'].shape; del f['wte']; f.create_dataset('wte', s, 'f4')" || fail "h5py"
    "$consolidate" "$work/hollow.h5" --export-hf "$work/hollow-hf" > "$work/hollow.log" 2>&1 && fail "a never-written dataset was exported"
    grep -q "dataset /*wte has a shape that disagrees with the bytes the file stores for it (corrupt)" "$work/hollow.log" ||
      { cat "$work/hollow.log"; fail "no error naming the never-written dataset"; }
    "$consolidate" "$work/ckA16" --out "$work/X.h5" --dtype fp8 > "$work/x.log" 2>&1 && fail "--dtype fp8 was accepted"
    grep -q "ckpt-consolidate: error: --dtype 'fp8' is not accepted; use fp32, bf16 or fp16" "$work/x.log" || fail "no clear --dtype error" ;;
  roundtrip)
    reference
    "$consolidate" "$work/ckA" --out "$work/C.h5" --optimizer > /dev/null || fail "consolidate"
    for y in "tp=1,pp=1,dp=1" "tp=4,pp=2,dp=1,zero=1" "tp=1,pp=4,dp=2,zero=1" "tp=2,pp=1,dp=4"; do
      rm -rf "$work/rs"
      "$consolidate" "$work/ckA" --reshard "$y" --out "$work/rs" > /dev/null || fail "reshard $y"
      mpirun -np 2 "$consolidate" "$work/rs" --out "$work/R.h5" --optimizer > /dev/null || fail "consolidate of $y"
      h5diff "$work/C.h5" "$work/R.h5" > "$work/diff.txt" || { head "$work/diff.txt"; fail "consolidate(reshard(C, $y)) differs"; }
      echo "  $y: consolidated tensors identical"
    done
    # Layouts that cannot exist are refused before any work (sizes overflowing 32 bits, trailing junk, a
    # ZeRO stage the checkpoint format has no layout for, expert parallelism on a dense model).
    for bad in "pp=65536,v=65536" "tp=2x" "tp=3,pp=2,dp=1" "tp=1,pp=1,dp=1,zero=5" "tp=1,pp=1,dp=2,ep=2"; do
      "$consolidate" "$work/ckA" --reshard "$bad" --out "$work/rsbad" > "$work/rsbad.log" 2>&1
      rc=$?
      cat "$work/rsbad.log"
      [ $rc -eq 2 ] || fail "--reshard $bad exited $rc, not 2"
      grep -q "ckpt-consolidate: error: .*--reshard" "$work/rsbad.log" || fail "--reshard $bad: no clear error"
      [ ! -e "$work/rsbad" ] || fail "--reshard $bad left $work/rsbad behind"
    done
    # A checkpoint resumes on any cp as it is: --reshard with cp says so and how.
    "$consolidate" "$work/ckA" --reshard "tp=1,pp=1,dp=2,cp=2" --out "$work/rsbad" > "$work/rsbad.log" 2>&1
    [ $? -eq 2 ] && grep -q "resumes on any cp as it is" "$work/rsbad.log" || { cat "$work/rsbad.log"; fail "--reshard cp=2 not refused"; }
    [ ! -e "$work/rsbad" ] || fail "--reshard cp=2 left $work/rsbad behind"
    h5dump -n "$work/C.h5" | grep -q 'dataset    /h3.qkv_w' || fail "h5dump does not list h3.qkv_w"
    h5dump -H -d /wte "$work/C.h5" | grep -q 'DATASPACE  SIMPLE { ( 256, 128 )' || fail "h5dump: wte is not 256 x 128"
    /usr/bin/python3 - "$work/C.h5" <<'PY' || fail "h5py could not read the consolidated file"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f["wte"].shape == (256, 128), f["wte"].shape
assert f["h0.qkv_w"].shape == (3, 128, 128)
assert f["optimizer/exp_avg/h0.fc_w"].shape == (512, 128)
assert abs(float(f["h0.ln1_w"][:].mean())) > 0
print("h5py: read", len(f.keys()), "entries")
PY
    ;;
  kill_during_save)
    start=$(date +%s)
    DTRAIN_FAULT_KILL_IN_SAVE=3:4 ALLOW_FAIL=1 train 8 "$work/k.jsonl" "$work/ckK" "${big[@]}" && fail "the job survived a SIGKILLed rank"
    [ $(( $(date +%s) - start )) -lt 60 ] || fail "the job took more than 60 s to end"
    [ "$(cat "$work/ckK/latest")" = step_00000002 ] || fail "latest moved to $(cat "$work/ckK/latest")"
    ls -a "$work/ckK" | grep -q '^\.tmp-step_00000004' || fail "no trace of the interrupted save (test broken?)"
    "$consolidate" "$work/ckK" --verify > /dev/null || fail "the last published checkpoint does not verify"
    train 8 "$work/k2.jsonl" "$work/ckK" "${big[@]}"
    grep -q "removed 1 unfinished save" "$work/last.log" || fail "the stale temporary was not cleaned"
    grep -q "resumed from .*step_00000002 at step 2" "$work/last.log" || fail "did not resume from the last good checkpoint"
    # A rank lost right after step 2's checkpoint is published (the others then wait for it): the
    # metrics file still has step 2, the step a resume continues after.
    DTRAIN_FAULT_KILL_AFTER_PUBLISH=3:2 ALLOW_FAIL=1 train 4 "$work/p.jsonl" "$work/ckP" && fail "the job survived a SIGKILLed rank"
    [ "$(cat "$work/ckP/latest")" = step_00000002 ] || fail "latest is $(cat "$work/ckP/latest"), not step 2's checkpoint"
    grep -q '^{"step": 2,' "$work/p.jsonl" || { cat "$work/p.jsonl"; fail "step 2 was published but its metrics line is missing"; } ;;
  corrupt_byte)
    damaged_copy
    f=$work/bad/step_00000004/shard_00001.h5
    size=$(stat -c %s "$f")
    printf '\xff' | dd of="$f" bs=1 seek=$(( size / 2 )) conv=notrunc status=none
    expect_load_error "shard_00001.h5" ;;
  truncated_shard)
    damaged_copy
    truncate -s 4096 "$work/bad/step_00000004/shard_00002.h5"
    expect_load_error "shard_00002.h5" ;;
  missing_shard)
    damaged_copy
    rm "$work/bad/step_00000004/shard_00005.h5"
    expect_load_error "shard_00005.h5. listed in the manifest is missing" ;;
  foreign_manifest)
    damaged_copy
    train 8 "$work/o.jsonl" "$work/ckO" "${big[@]}"  # another run, same layout
    cp "$work/ckO/step_00000004/manifest.txt" "$work/bad/step_00000004/manifest.txt"
    expect_load_error "(files from different saves mixed)" ;;
  bad_hex_id)
    damaged_copy
    sed -i 's/^checkpoint_id .*/checkpoint_id zz00000000000000/' "$work/bad/step_00000004/manifest.txt"
    expect_load_error "manifest.txt' is malformed: checkpoint_id 'zz00000000000000' is not 16 hexadecimal digits" ;;
  bad_hex_checksum)
    damaged_copy
    sed -i 's/^\(shard shard_00001.h5 [0-9]*\) .*/\1 not-a-checksum/' "$work/bad/step_00000004/manifest.txt"
    expect_load_error "the checksum 'not-a-checksum' of shard_00001.h5 is not 16 hexadecimal digits" ;;
  blank_latest)
    damaged_copy
    printf '\n  \n' > "$work/bad/latest"
    ALLOW_FAIL=1 train 2 "$work/x.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      && fail "trained although latest is blank"
    cat "$work/last.log"
    [ "$(grep -c "dtrain: error: .*'$work/bad/latest' is empty or unreadable" "$work/last.log")" -eq 1 ] || fail "no single error naming latest"
    [ ! -s "$work/x.jsonl" ] || fail "a step was trained"
    # The fix the message suggests works: a step directory, or load=none, never read latest.
    train 2 "$work/y.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      "--checkpoint.load=$work/bad/step_00000004" --training.train_iters=5
    grep -q "resumed from .*step_00000004 at step 4" "$work/last.log" || fail "could not resume from a path with a blank latest" ;;
  other_model)
    damaged_copy
    ALLOW_FAIL=1 train 2 "$work/x.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      --model.num_layers=2 --model.num_attention_heads=8 && fail "resumed a checkpoint of another model"
    cat "$work/last.log"
    grep -q "dtrain: error: .*checkpoint '$work/bad/step_00000004' was saved for another model" "$work/last.log" || fail "no model error"
    grep -q "model.num_layers = 4 in the checkpoint, 2 in this run" "$work/last.log" || fail "num_layers not named"
    grep -q "model.num_attention_heads = 4 in the checkpoint, 8 in this run" "$work/last.log" || fail "heads not named"
    # A key that changes no tensor's shape but the model's meaning (the norm's epsilon) is refused too.
    ALLOW_FAIL=1 train 2 "$work/x.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      --model.norm_epsilon=1e-6 && fail "resumed a checkpoint of another norm epsilon"
    grep -q "model.norm_epsilon = 1e-05 in the checkpoint, 1e-06 in this run" "$work/last.log" || { cat "$work/last.log"; fail "epsilon not named"; }
    # Layout and batch keys may differ: the same checkpoint resumes at another layout and batch.
    train 2 "$work/y.jsonl" "$work/bad" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=2 \
      --model.global_batch_size=4 --training.train_iters=5
    grep -q "resumed from .*step_00000004 at step 4" "$work/last.log" || fail "did not resume at another layout and batch" ;;
  fresh_run_in_used_dir)
    # A directory with step_8 and step_10 of an earlier run (keep_last=2); a fresh run (load=none) saves
    # step 4 there: step_4 becomes latest and survives pruning, it verifies, and load=auto resumes it.
    one=(--system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 --checkpoint.keep_last=2)
    train 2 "$work/a.jsonl" "$work/ckU" "${one[@]}" --training.train_iters=10
    [ "$(ls "$work/ckU" | grep '^step_' | tr '\n' ' ')" = "step_00000008 step_00000010 " ] || fail "setup: $(ls "$work/ckU")"
    train 2 "$work/b.jsonl" "$work/ckU" "${one[@]}" --training.train_iters=4 --checkpoint.save_interval=4 --checkpoint.load=none
    grep -q "warning: checkpoint.dir '$work/ckU' already holds 2 checkpoint(s) (latest: $work/ckU/step_00000010) that this run does not resume from" \
      "$work/last.log" || { cat "$work/last.log"; fail "no warning about the earlier run's checkpoints"; }
    [ "$(cat "$work/ckU/latest")" = step_00000004 ] || fail "latest is $(cat "$work/ckU/latest")"
    [ -d "$work/ckU/step_00000004" ] || fail "the new latest was pruned: $(ls "$work/ckU")"
    [ "$(ls "$work/ckU" | grep '^step_' | tr '\n' ' ')" = "step_00000004 step_00000010 " ] || fail "kept $(ls "$work/ckU")"
    "$consolidate" "$work/ckU" --verify > /dev/null || fail "--verify of the directory fails"
    train 2 "$work/c.jsonl" "$work/ckU" "${one[@]}" --training.train_iters=6
    grep -q "resumed from .*step_00000004 at step 4" "$work/last.log" || fail "load=auto did not resume the new latest" ;;
  keep_last)
    train 2 "$work/l.jsonl" "$work/ckL" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1 \
      --training.train_iters=8 --checkpoint.keep_last=2
    [ "$(ls "$work/ckL" | grep -c '^step_')" -eq 2 ] || fail "keep_last=2 kept $(ls "$work/ckL" | grep -c '^step_')"
    [ -d "$work/ckL/step_00000006" ] && [ -d "$work/ckL/step_00000008" ] || fail "not the two newest kept: $(ls "$work/ckL")"
    [ "$(cat "$work/ckL/latest")" = step_00000008 ] || fail "latest is $(cat "$work/ckL/latest")" ;;
  disk_full)
    mkdir -p "$work/small"
    mount -t tmpfs -o size=14m tmpfs "$work/small" 2>/dev/null || { echo "SKIP: cannot mount a small tmpfs here"; exit 77; }
    train_exit_codes 2 "--checkpoint.dir=$work/small/ck" --system.tensor_model_parallel_size=1 \
      --system.pipeline_model_parallel_size=1 || fail "not every rank exited 2 after a save on a full disk (a crash?)"
    grep -q "dtrain: error: .*checkpoint save of step 4 failed; the previous checkpoint is untouched" "$work/last.log" ||
      fail "no clear error for the full disk"
    [ "$(cat "$work/small/ck/latest")" = step_00000002 ] || fail "latest is not the step-2 checkpoint"
    ls -a "$work/small/ck" | grep -q '^\.tmp' && fail "the failed save left its temporary behind"
    "$consolidate" "$work/small/ck" --verify > /dev/null || fail "the last checkpoint does not verify" ;;
  final_weights_disk_full)
    # Room for the last checkpoint (about 10 MB) but not for model-final.h5 (about 3.4 MB more).
    mkdir -p "$work/small"
    mount -t tmpfs -o size=12m tmpfs "$work/small" 2>/dev/null || { echo "SKIP: cannot mount a small tmpfs here"; exit 77; }
    train_exit_codes 2 "--checkpoint.dir=$work/small/ck" --system.tensor_model_parallel_size=1 \
      --system.pipeline_model_parallel_size=1 --checkpoint.save_interval=0 || fail "not every rank exited 2"
    [ "$(grep -c "dtrain: error: .*the weights file '$work/small/ck/model-final.h5' was not written: HDF5 file '$work/small/ck/model-final.h5.tmp.[0-9]*'" "$work/last.log")" -eq 1 ] ||
      fail "no single clear error for the final weights"
    grep -q "HDF5-DIAG" "$work/last.log" && fail "HDF5's own error stack was printed"
    ls -a "$work/small/ck" | grep -q 'model-final' && fail "a model-final file was left behind: $(ls "$work/small/ck")"
    [ "$(cat "$work/small/ck/latest")" = step_00000004 ] || fail "the last checkpoint was not published" ;;
  consolidate_disk_full)
    # A consolidated file of 10 MB on a 4 MB filesystem, written by 2 ranks (parallel HDF5).
    train 2 "$work/c.jsonl" "$work/ckC" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
    mkdir -p "$work/small"
    mount -t tmpfs -o size=4m tmpfs "$work/small" 2>/dev/null || { echo "SKIP: cannot mount a small tmpfs here"; exit 77; }
    OMPI_MCA_orte_abort_on_non_zero_status=0 timeout -k 5 60 mpirun -np 2 bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ \
      "$consolidate" "$work/ckC" --out "$work/small/C.h5" --optimizer > "$work/cons.log" 2>&1
    grep -v '^  \[' "$work/cons.log"
    [ "$(grep -c '^rank-exit [01] 2$' "$work/cons.log")" -eq 2 ] || fail "not every rank exited 2 (a crash?)"
    grep -q "ckpt-consolidate: error: .*(disk full?)" "$work/cons.log" || fail "no clear error"
    grep -q "HDF5-DIAG" "$work/cons.log" && fail "HDF5's own error stack was printed"
    [ -z "$(ls -A "$work/small")" ] || fail "left behind: $(ls "$work/small")" ;;
  metrics_disk_full)
    train 2 /dev/full "$work/ckM" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
    [ "$(grep -c "^warning: cannot write the metrics file '/dev/full' (No space left on device)" "$work/last.log")" -eq 1 ] ||
      { cat "$work/last.log"; fail "no single warning about the metrics file"; } ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS

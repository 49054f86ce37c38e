#!/usr/bin/env bash
# fp16 dynamic loss scaling with an overflow injected at step 4 (debug.nonfinite_grad_at_step: world rank
# 0 writes inf into a gradient after the gradient sync). Scale 1024, window 3, hysteresis 1, so by
# Megatron's rule the scale after each of the 8 steps is 1024 1024 2048 | 1024 (step 4 skipped, halved)
# 1024 1024 2048 2048. Checked:
#  - one rank and tp=2 log the same scales and the one skip, their losses within fp16's resolution
#    2^-11 (fp32 summation order only, rounded to fp16: testing::kFp16Resolution);
#  - the skipped step changed nothing: step 3's and step 4's checkpoints hold the same weights and
#    moments, bit for bit;
#  - the checkpoint holds the scaler (h5py): step 5's loss_scale 1024, trackers {growth 1, hysteresis 0},
#    skipped_steps 1;
#  - resumed at step 5 on tp=2, the run goes on with the same scales and losses as the uninterrupted one;
#  - at the smallest scale (initial = min_loss_scale = 1) the same overflow is a non-finite step:
#    exit 5 and a message naming the scale, not a skip of every step that follows.
#   loss_scaling.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
fp16_resolution=0.00048828125
common=("$src/inputs/tiny.ini" "--data.path=$work/d" --system.pipeline_model_parallel_size=1 --system.precision=fp16
        --optimizer.initial_loss_scale=1024 --optimizer.loss_scale_window=3 --optimizer.hysteresis=1
        --debug.nonfinite_grad_at_step=4 --training.train_iters=8 --training.eval_interval=0 --logging.log_interval=1
        --logging.sample_tokens=0 "$smooth_adam")
train() {  # train NAME NP TP [ARGS...]: metrics in $work/NAME.jsonl, output in $work/NAME.out
  local name=$1 np=$2 tp=$3
  shift 3
  "$here/run_mpi.sh" 120 "$np" "$dtrain" "${common[@]}" --system.tensor_model_parallel_size="$tp" \
    "--logging.metrics_file=$work/$name.jsonl" "$@" > "$work/$name.out" 2>&1 || { cat "$work/$name.out"; fail "$name run failed"; }
}
"$here/run_mpi.sh" 120 1 "$dtrain" "${common[@]}" --system.tensor_model_parallel_size=1 --optimizer.initial_loss_scale=1 \
  --optimizer.min_loss_scale=1 --optimizer.loss_scale_window=100 --checkpoint.dir= > "$work/floor.out" 2>&1
grep -q '^rank-exit 0 5$' "$work/floor.out" && grep -q "step 4: .* at fp16's smallest loss scale" "$work/floor.out" ||
  { cat "$work/floor.out"; fail "an overflow at the smallest loss scale was not a non-finite step (exit 5)"; }
train one 1 1 "--checkpoint.dir=$work/ck" --checkpoint.save_interval=1 --checkpoint.keep_last=10
train tp2 2 2 "--checkpoint.dir=$work/ck2"
train resumed 2 2 "--checkpoint.dir=$work/ck3" "--checkpoint.load=$work/ck/step_00000005"
grep -q '^step 4/8 .*| loss scale 1024 | skipped 1 (overflow)' "$work/one.out" || { cat "$work/one.out"; fail "step 4's line does not show the skip"; }
/usr/bin/python3 - "$work" "$fp16_resolution" <<'PY' || fail "loss scaling"
import json, sys, h5py, numpy as np
work, tol = sys.argv[1], float(sys.argv[2])
def run(name):
    return [json.loads(line) for line in open(f"{work}/{name}.jsonl")]
one, tp2, resumed = run("one"), run("tp2"), run("resumed")
want_scales = [1024, 1024, 2048, 1024, 1024, 1024, 2048, 2048]
want_skipped = [0, 0, 0, 1, 0, 0, 0, 0]
for name, r in (("one rank", one), ("tp=2", tp2)):
    assert [x["loss_scale"] for x in r] == want_scales, (name, [x["loss_scale"] for x in r])
    assert [x["skipped"] for x in r] == want_skipped, (name, [x["skipped"] for x in r])
    assert r[3]["grad_norm"] is None, (name, "the skipped step's norm is not null")
assert [x["step"] for x in resumed] == [6, 7, 8], [x["step"] for x in resumed]
assert [x["loss_scale"] for x in resumed] == want_scales[5:], [x["loss_scale"] for x in resumed]
for name, r, ref in (("tp=2", tp2, one), ("resumed on tp=2", resumed, one[5:])):
    for a, b in zip(r, ref):
        rel = abs(a["loss"] - b["loss"]) / b["loss"]
        print(f"  {name} step {a['step']}: loss {a['loss']:.6f} one rank {b['loss']:.6f} rel {rel:.1e}")
        assert rel <= tol, (name, a["step"], rel)
def shard(step):
    return h5py.File(f"{work}/ck/step_{step:08d}/shard_00000.h5", "r")
s3, s4, s5 = shard(3), shard(4), shard(5)
names = []
s3.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert names, "no datasets in step 3's shard"
for n in names:
    assert np.array_equal(s3[n][()], s4[n][()]), f"{n} changed in the skipped step"
print(f"  the skipped step left all {len(names)} datasets (weights, moments) unchanged")
assert s5.attrs["skipped_steps"] == 1 and s5.attrs["loss_scale"] == 1024.0, dict(s5.attrs)
assert list(s5.attrs["loss_scale_trackers"]) == [1, 0], list(s5.attrs["loss_scale_trackers"])
assert s3.attrs["skipped_steps"] == 0 and s3.attrs["loss_scale"] == 2048.0
print("  step 5's checkpoint: loss scale 1024, trackers [1, 0], 1 step skipped")
PY
echo PASS

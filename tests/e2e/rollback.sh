#!/usr/bin/env bash
# training.on_nonfinite = rollback: an inf injected into a gradient at step 5 (debug.nonfinite_grad_at_step)
# makes every rank go back to the latest checkpoint and skip step 5's batch; the run then equals, bit
# for bit, a run that never used that batch (training.iterations_to_skip=5), at every logged step and
# in its last checkpoint, with the checkpoint at step 4 (nothing to redo) and at step 3 (step 4 redone).
# The checkpoints after it carry the skipped batch (skipped_batches [5], skipped_steps 1). Logged every 4
# steps, the losses are read back at steps 3 (a save), 4 and 6 (a save): step 5's inf is found at step
# 6, before its save, and the run rolls back to step 3 and equals the others all the same. With
# training.max_rollbacks=0 the same run stops with exit 5 (a non-finite step) on every rank, naming step
# 5 and the step that read it back.
#   rollback.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
common=("$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=1 --system.pipeline_model_parallel_size=1
        --training.train_iters=8 --training.eval_interval=0 --logging.log_interval=1 --logging.sample_tokens=0
        --checkpoint.keep_last=10 "$smooth_adam")
train() {  # train NAME [ARGS...]: 2 ranks (dp=2); metrics $work/NAME.jsonl, output $work/NAME.out, checkpoints $work/NAME
  local name=$1
  shift
  "$here/run_mpi.sh" 120 2 "$dtrain" "${common[@]}" "--logging.metrics_file=$work/$name.jsonl" "--checkpoint.dir=$work/$name" "$@" \
    > "$work/$name.out" 2>&1
  [ "$(grep -c '^rank-exit [0-9]* 0$' "$work/$name.out")" -eq 2 ]  # every rank finished
}
train never --training.iterations_to_skip=5 --checkpoint.save_interval=2 || { cat "$work/never.out"; fail "the reference run failed"; }
for every in 2 3; do
  train "back$every" --checkpoint.save_interval=$every --debug.nonfinite_grad_at_step=5 --training.on_nonfinite=rollback ||
    { cat "$work/back$every.out"; fail "the rollback run (checkpoints every $every steps) failed"; }
  grep -q "rolling back (1 of training.max_rollbacks=3)" "$work/back$every.out" || fail "no rollback message"
  grep -q "checkpoint: rolled back to .*step_0000000$((every == 2 ? 4 : 3)) at step $((every == 2 ? 4 : 3))" "$work/back$every.out" ||
    { cat "$work/back$every.out"; fail "not rolled back to the latest checkpoint"; }
done
train late --checkpoint.save_interval=3 --logging.log_interval=4 --debug.nonfinite_grad_at_step=5 --training.on_nonfinite=rollback ||
  { cat "$work/late.out"; fail "the rollback run logged every 4 steps failed"; }
grep -q "checkpoint: rolled back to .*step_00000003 at step 3" "$work/late.out" || { cat "$work/late.out"; fail "late: not rolled back to step 3"; }
/usr/bin/python3 - "$work" <<'PY' || fail "the rolled-back runs differ from the run that never used the batch"
import json, sys, h5py, numpy as np
work = sys.argv[1]
def losses(name):
    out = {}
    for line in open(f"{work}/{name}.jsonl"):
        r = json.loads(line)
        out[r["step"]] = r["loss"]  # a redone step: its last line
    return out
never = losses("never")
assert sorted(never) == [1, 2, 3, 4, 6, 7, 8], sorted(never)
for name in ("back2", "back3", "late"):
    got = losses(name)
    assert got == (never if name != "late" else {s: never[s] for s in (4, 8)}), (name, got, never)
    for step in (6, 8):  # after the rollback, saved by both runs (every 2 steps, every 3, and the last)
        a = h5py.File(f"{work}/never/step_{step:08d}/shard_00000.h5", "r")
        b = h5py.File(f"{work}/{name}/step_{step:08d}/shard_00000.h5", "r")
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            assert np.array_equal(a[n][()], b[n][()]), (name, step, n)
        assert list(b.attrs["skipped_batches"]) == [5] and b.attrs["skipped_steps"] == 1, dict(b.attrs)
    print(f"  {name}: every logged loss and the checkpoints equal the run that never used batch 5, bit for bit")
PY
out=$("$here/run_mpi.sh" 120 2 "$dtrain" "${common[@]}" "--checkpoint.dir=$work/none" --checkpoint.save_interval=2 \
      --logging.log_interval=4 --debug.nonfinite_grad_at_step=5 --training.on_nonfinite=rollback --training.max_rollbacks=0 2>&1)
[ "$(grep -c '^rank-exit [0-9]* 5$' <<<"$out")" -eq 2 ] || { echo "$out" | tail; fail "max_rollbacks=0: not exit 5 on every rank"; }
grep -q "training.max_rollbacks=0 rollbacks already made" <<<"$out" || fail "max_rollbacks=0: no message naming the budget"
grep -q "step 5: the loss is .* and the gradient norm inf; its optimizer update was skipped and training stops at step 6, where it was read back" \
  <<<"$out" || { echo "$out" | tail; fail "max_rollbacks=0: the message does not name step 5 and step 6"; }
echo PASS

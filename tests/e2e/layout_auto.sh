#!/usr/bin/env bash
# system.layout = auto on inputs/clusters/cpu-2core.ini: at 1, 2 and 4 ranks the start-up line names the
# chosen layout; at 2 ranks it is `dtrain plan`'s fastest for the same cluster (the planner whose pick
# tools/bench/plan_accuracy measures within a few % of the fastest measured layout); a layout key on the
# command line still holds (tp=2); training runs on the choice; without system.cluster_file the run is
# refused on every rank (exit 2) naming the key.
#   layout_auto.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
here=$(dirname "$0")
source "$here/lib.sh"
make_small_data "$tool"
cluster=$src/inputs/clusters/cpu-2core.ini
auto=("$src/inputs/tiny.ini" "--data.path=$work/d" --system.layout=auto "--system.cluster_file=$cluster" --checkpoint.dir=
      --training.eval_interval=0 --logging.sample_tokens=0)
for np in 1 2 4; do
  out=$("$here/run_mpi.sh" 60 $np "$dtrain" --dry-run "${auto[@]}" 2>&1)
  grep -q "^layout auto on '.*' (1 node(s) x $np ranks): .*dp=[0-9].*; predicted .* s/step" <<<"$out" ||
    { echo "$out" | tail; fail "no layout line at $np rank(s)"; }
  [ "$(grep -c "^rank-exit [0-9]* 0$" <<<"$out")" -eq $np ] || fail "the dry run at $np rank(s) failed"
  grep '^layout auto' <<<"$out"
done
# At 2 ranks (the cluster's own shape): dtrain plan's fastest, key by key.
plan=$("$dtrain" plan "$src/inputs/tiny.ini" --cluster "$cluster" 2>&1 | sed -n '/^run the fastest/,$p')
out=$("$here/run_mpi.sh" 60 2 "$dtrain" --dry-run "${auto[@]}" 2>&1)
for key in tensor_model_parallel_size pipeline_model_parallel_size zero_stage micro_batch_size recompute_granularity; do
  want=$(grep -o -- "--[a-z]*\.$key=[^ ]*" <<<"$plan" | head -1 | cut -d= -f2)
  got=$(sed -n "s/^$key = //p" <<<"$out" | head -1)  # the resolved configuration's line (each key is in one section)
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "$key: layout auto chose '$got', dtrain plan's fastest has '$want'"
done
echo "  at 2 ranks: dtrain plan's fastest layout"
out=$("$here/run_mpi.sh" 60 2 "$dtrain" --dry-run "${auto[@]}" --system.tensor_model_parallel_size=2 2>&1)
grep -q "^layout auto on .*: tp=2 .*agrees with the command line" <<<"$out" || { echo "$out" | tail -3; fail "tp=2 on the command line did not hold"; }
out=$("$here/run_mpi.sh" 60 2 "$dtrain" "${auto[@]}" --training.train_iters=3 --logging.log_interval=1 2>&1)
[ "$(grep -c '^step [0-9]/3 ' <<<"$out")" -eq 3 ] && [ "$(grep -c '^rank-exit [0-9]* 0$' <<<"$out")" -eq 2 ] ||
  { echo "$out" | tail -5; fail "training on the chosen layout failed"; }
out=$("$here/run_mpi.sh" 60 2 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --system.layout=auto 2>&1)
[ "$(grep -c '^rank-exit [0-9]* 2$' <<<"$out")" -eq 2 ] && grep -q "set system.cluster_file" <<<"$out" ||
  { echo "$out" | tail -3; fail "no cluster file: not refused with exit 2 naming the key"; }
echo PASS

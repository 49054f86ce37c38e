#!/usr/bin/env bash
# A deliberately stuck rank (--debug.stall_rank=3 --debug.stall_at_step=5) on 4 ranks, tp=2 x pp=2:
#   step        system.step_timeout_s=4: rank 3 reports that it is busy (not waiting) in its forward,
#               names step, micro-batch and stage, and the job ends within timeout + 10 s
#   collective  system.collective_timeout_s=4: a rank waiting on rank 3 names the operation, group and
#               peer rank 3, and the job ends within timeout + 10 s
#   collective_zbv  the same under the zero-bubble V schedule (two chunks a stage, split backward)
# Either way mpirun ends with the watchdog's exit code 4 and the report names the rank's node.
#   hang_watchdog.sh CASE DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
case_name=$1 dtrain=$2 tool=$3 src=$4
source "$(dirname "$0")/lib.sh"
# mpirun's own second between SIGTERM and SIGKILL (lib.sh sets none): the first rank's watchdog ends the
# job, and the rank waiting on rank 3 in the pipeline, whose report this test reads, may time out a
# moment later (as a launcher's kill grace, Slurm's KillWait, allows).
export OMPI_MCA_odls_base_sigkill_timeout=1
make_small_data "$tool"
case $case_name in
  step) limits=(--system.step_timeout_s=4 --system.collective_timeout_s=600); expect='rank 3 on node [^:]+: error: hang watchdog: step 5 has run for [0-9.]+ s \(system.step_timeout_s=4\), busy in forward of micro-batch 0, chunk 0, pipeline stage 1' ;;
  collective|collective_zbv) limits=(--system.step_timeout_s=600 --system.collective_timeout_s=4); expect='error: hang watchdog: stuck for [0-9.]+ s \(system.collective_timeout_s=4\) in recv [a-z]+ \(group pp, peer rank 3,' ;;
  *) echo "unknown case"; exit 2 ;;
esac
[ "$case_name" = collective_zbv ] && limits+=(--system.pipeline_schedule=zbv --system.virtual_pipeline_model_parallel_size=2)
start=$(date +%s)
scale=${DTRAIN_TEST_TIME_SCALE:-1}  # sanitized builds run slower (tests/e2e/CMakeLists.txt)
timeout -k 5 $((60 * scale)) mpirun -np 4 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --training.train_iters=50 --checkpoint.dir= \
  --training.eval_interval=0 --logging.log_interval=1 --debug.stall_rank=3 --debug.stall_at_step=5 "${limits[@]}" > "$work/out.log" 2>&1
rc=$? elapsed=$(( $(date +%s) - start ))
grep -a 'watchdog' "$work/out.log"
echo "rc=$rc elapsed=${elapsed}s"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "the job hung until the test's own timeout"
[ $rc -eq 4 ] || fail "the job ended with $rc, not the watchdog's exit code 4"
grep -aq "on node $(hostname): error: hang watchdog" "$work/out.log" || fail "the watchdog's report does not name the node"
[ $elapsed -le $((14 * scale)) ] || fail "the job took ${elapsed}s to end (timeout 4 s + 10 s, x $scale)"
grep -aEq "$expect" "$work/out.log" || fail "no report matching: $expect"
echo PASS

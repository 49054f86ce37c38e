#!/usr/bin/env bash
# slurm/dtrain-job.sh's decisions where a real Slurm cannot be made to misbehave on demand, against
# stub srun, scontrol, sinfo and scancel (the tests/slurm cases run the real Slurm for everything else):
#   controller_silent  the step fails once while `scontrol show job` prints nothing (a controller timeout
#                      during a node failure): a plain restart, never a requeue without every node
#   fractional_wait    DTRAIN_RESTART_WAIT_S=0.5: two restarts after 0.5 and 1 s, then success (exit 0)
#   bad_variable       DTRAIN_MAX_RESTARTS=x: one message naming it, exit 2, nothing run
#   dry_run_fails      the dry run fails with bad input (exit 2): the job ends with 2 and runs no step
#   dry_run_retried    the first dry run fails otherwise (exit 1: a start-up that failed): tried again
#   job_script_stubs.sh CASE SOURCE_DIR
set -u
case_name=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/bin" "$work/ck"
cat > "$work/bin/srun" <<'STUB'
#!/usr/bin/env bash
# A dry run prints what the job script reads; a step fails FAILS times (exit STEP_RC, a new checkpoint
# each time), then succeeds.
for a in "$@"; do [ "$a" = --dry-run ] && dry=1; done
if [ "${dry:-0}" = 1 ]; then
  d=$(cat "$W/dry_runs" 2>/dev/null || echo 0)
  echo $((d + 1)) > "$W/dry_runs"
  [ "$d" -ge "${DRY_FAILS:-0}" ] || { echo "dtrain: error: the stub's dry run failure" >&2; exit "$DRY_RC"; }
  printf '== launch ==\nlayout tp=1 (stub)\n== pipeline ==\n[checkpoint]\ndir = %s\n[system]\nlayout = manual\n' "$W/ck"
  exit 0
fi
n=$(cat "$W/steps" 2>/dev/null || echo 0)
echo $((n + 1)) > "$W/steps"
if [ "$n" -lt "${FAILS:-0}" ]; then
  echo "step_$((n + 1))" > "$W/ck/latest"
  echo "dtrain: rank 1 on node n2: error: the stub's failure"
  exit "${STEP_RC:-1}"
fi
echo "the stub's step ran to the end"
STUB
cat > "$work/bin/scontrol" <<'STUB'
#!/usr/bin/env bash
case "$1 ${2:-}" in
  "show job") [ "${SCONTROL_SILENT:-0}" = 1 ] && exit 1; echo "JobId=$3 NodeList=n[1-2] ExcNodeList=(null)" ;;
  "show hostnames") [ "${3:-}" = "n[1-2]" ] && printf 'n1\nn2\n' || tr ',' '\n' <<<"${3:-}" | grep . ;;
  "show hostlist") echo "$3" ;;
  "requeue "*) echo "requeue" >> "$W/requeues" ;;
esac
exit 0
STUB
printf '#!/usr/bin/env bash\nexit 0\n' > "$work/bin/sinfo"
printf '#!/usr/bin/env bash\nexit 0\n' > "$work/bin/scancel"
chmod +x "$work/bin/"*
export W=$work PATH="$work/bin:$PATH" SLURM_JOB_ID=1 SLURM_JOB_NODELIST='n[1-2]' SLURM_JOB_NUM_NODES=2 SLURM_NTASKS=2
export DTRAIN_HOME=$src DTRAIN_SRUN_ARGS= DTRAIN_RESTART_WAIT_S=0
case $case_name in
  controller_silent) export SCONTROL_SILENT=1 FAILS=1 ;;
  fractional_wait) export DTRAIN_RESTART_WAIT_S=0.5 FAILS=2 ;;
  bad_variable) export DTRAIN_MAX_RESTARTS=x ;;
  dry_run_fails) export DRY_RC=2 DRY_FAILS=9 ;;
  dry_run_retried) export DRY_RC=1 DRY_FAILS=1 ;;
  *) echo "unknown case"; exit 2 ;;
esac
timeout -k 5 60 bash "$src/slurm/dtrain-job.sh" "$src/inputs/tiny.ini" > "$work/job.log" 2>&1
rc=$?
cat "$work/job.log"
echo "rc=$rc"
steps=$(cat "$work/steps" 2>/dev/null || echo 0)
case $case_name in
  controller_silent)
    [ $rc -eq 0 ] || fail "the job ended with $rc, not 0"
    grep -q "controller did not answer" "$work/job.log" || fail "the silent controller is not reported"
    grep -q "requeueing" "$work/job.log" && fail "a silent controller was read as every node gone"
    [ ! -s "$work/requeues" ] || fail "the job requeued itself"
    [ "$steps" -eq 2 ] || fail "$steps steps ran, not 2 (a failure and its restart)" ;;
  fractional_wait)
    [ $rc -eq 0 ] || fail "the job ended with $rc, not 0"
    [ "$(grep -c '^dtrain job: restarting' "$work/job.log")" -eq 2 ] || fail "not two restarts"
    grep -q "restart 2 of 3 in 1 s" "$work/job.log" || fail "the back-off did not double from 0.5 s"
    [ "$steps" -eq 3 ] || fail "$steps steps ran, not 3" ;;
  bad_variable)
    [ $rc -eq 2 ] || fail "the job ended with $rc, not 2"
    grep -q "DTRAIN_MAX_RESTARTS=x: must be a whole number" "$work/job.log" || fail "the message does not name the variable"
    [ ! -e "$work/dry_runs" ] && [ "$steps" -eq 0 ] || fail "something ran before the check" ;;
  dry_run_fails)
    [ $rc -eq 2 ] || fail "the job ended with $rc, not the dry run's 2"
    grep -q "the dry run failed (exit 2: bad input" "$work/job.log" || fail "no message for the failed dry run"
    [ "$(cat "$work/dry_runs")" -eq 1 ] || fail "bad input's dry run ran $(cat "$work/dry_runs") times, not once"
    [ "$steps" -eq 0 ] || fail "a step ran after the dry run failed" ;;
  dry_run_retried)
    [ $rc -eq 0 ] || fail "the job ended with $rc, not 0"
    [ "$(cat "$work/dry_runs")" -eq 2 ] || fail "the dry run ran $(cat "$work/dry_runs") times, not twice"
    [ "$steps" -eq 1 ] || fail "$steps steps ran, not 1" ;;
esac
echo PASS

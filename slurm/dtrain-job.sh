#!/usr/bin/env bash
# The body shared by dtrain's sbatch scripts (sourced by them, not run by hand): loads the module,
# prints the resolved layout, launches `srun dtrain "$INPUT"`, and requeues the job when dtrain stopped
# on a preemption signal (exit 3) after saving a checkpoint. The requeued job resumes from `latest`
# (checkpoint.load = auto), keeps its job id and appends to the same log (--open-mode=append).
# A failure a restart may clear (dtrain's exit 4, a hang; 1, one rank's failure; a rank killed) starts
# the step again inside the allocation, resuming from `latest`, after a back-off, at most
# DTRAIN_MAX_RESTARTS times, naming the node the failing rank reported. Bad input (2) and a non-finite
# step (5) are never retried, and neither is a failure that made no checkpoint since the last restart
# (it would only fail again).
#
# Environment (all optional):
#   INPUT                  input.ini (default: inputs/tiny.ini, or the script's first argument)
#   DTRAIN_HOME            checkout or install prefix (default: the directory above slurm/)
#   DTRAIN_MODULE          module to load (default: dtrain); DTRAIN_MODULEPATH adds a module directory
#   DTRAIN_SRUN_ARGS       extra srun arguments (default: --mpi=pmix; sites with MpiDefault=pmix may clear it)
#   DTRAIN_ARGS            extra dtrain arguments, e.g. "--training.train_iters=100"
#   DTRAIN_MAX_REQUEUES    requeue at most this many times (default 10)
#   DTRAIN_MAX_RESTARTS    restart a failed step at most this many times in the allocation (default 3)
#   DTRAIN_RESTART_WAIT_S  seconds before the first restart, doubling after each (default 5)
#   DTRAIN_EXCLUDE_FAILED  1 (default): with system.layout = auto, a restart leaves the node of the failure
#                          (a rank stuck outside communication, or a task that died) behind when other
#                          nodes remain (srun --exclude), and the planner chooses a layout for the ranks left
set -uo pipefail
home=${DTRAIN_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
input=${INPUT:-${1:-$home/inputs/tiny.ini}}
echo "dtrain job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}) on ${SLURM_JOB_NODELIST:-?}: $SLURM_JOB_NUM_NODES node(s), ${SLURM_NTASKS:-?} task(s), input $input, $(date -Is)"

if [ -f /usr/share/lmod/lmod/init/bash ] && ! command -v module >/dev/null 2>&1; then
  source /usr/share/lmod/lmod/init/bash
fi
if command -v module >/dev/null 2>&1; then
  module use "${DTRAIN_MODULEPATH:-$home/modules}"
  module load "${DTRAIN_MODULE:-dtrain}" || { echo "dtrain job: 'module load ${DTRAIN_MODULE:-dtrain}' failed" >&2; exit 1; }
else
  export PATH="$home/build:$home/build/tools:$PATH"
fi

# The layout this allocation gives, before any compute is spent.
srun_args=(${DTRAIN_SRUN_ARGS---mpi=pmix})
# shellcheck disable=SC2086
dry=$(srun "${srun_args[@]}" dtrain --dry-run "$input" ${DTRAIN_ARGS:-})
sed -n '/^== launch/,/^== pipeline/p' <<<"$dry" | grep -v '^== pipeline'
# The run's checkpoint.dir and system.layout, from the resolved configuration the dry run prints.
ckpt_dir=$(sed -n '/^\[checkpoint\]/,/^\[/s/^dir = //p' <<<"$dry")
layout_mode=$(sed -n '/^\[system\]/,/^\[/s/^layout = //p' <<<"$dry")

# A signal to this batch shell (scancel --signal=USR1 --batch, or --signal=B:USR1@grace) is passed on
# to the job's steps as USR1: dtrain then stops at the next step boundary with a checkpoint.
stop=0
trap 'stop=1; echo "dtrain job: passing the stop signal on to the job steps"; scancel --signal=USR1 "$SLURM_JOB_ID"' USR1 TERM
# The checkpoint `latest` names in checkpoint.dir, or nothing.
latest() { [ -n "$ckpt_dir" ] && cat "$ckpt_dir/latest" 2>/dev/null; }
attempt_log=$(mktemp "${TMPDIR:-/tmp}/dtrain-attempt.XXXXXX")
restarts=0 wait_s=${DTRAIN_RESTART_WAIT_S:-5}
nodes=${SLURM_JOB_NUM_NODES:-1} per_node=$(( ${SLURM_NTASKS:-1} / ${SLURM_JOB_NUM_NODES:-1} )) excluded=""
place=()  # srun's node, task and exclusion arguments once a node is left behind
while true; do
  before=$(latest)
  # --kill-on-bad-exit=1 ends the job at once when a rank dies (a crash, an out-of-memory kill); without
  # it the other ranks would wait in their next collective for system.collective_timeout_s (300 s).
  # The step's output also goes to a file, where its ranks' last words are looked up; the pipeline's
  # status is srun's (pipefail), and waiting for it waits for tee too.
  # shellcheck disable=SC2086
  srun "${srun_args[@]}" "${place[@]}" --kill-on-bad-exit=1 dtrain "$input" ${DTRAIN_ARGS:-} 2>&1 | tee "$attempt_log" &
  step=$!
  wait $step; rc=$?
  while kill -0 $step 2>/dev/null; do wait $step; rc=$?; done   # wait again if a trapped signal interrupted it
  case $rc in
    0 | 3) break ;;
    2) echo "dtrain job: bad input (exit 2): not restarted"; break ;;
    5) echo "dtrain job: a non-finite step (exit 5): not restarted (see training.on_nonfinite)"; break ;;
  esac
  if [ "$stop" -eq 1 ]; then echo "dtrain job: step failed (exit $rc) after a stop signal: not restarted"; break; fi
  # The node of the failure: a rank the watchdog found stuck outside communication ("rank R on node N:
  # error: hang watchdog: ... busy in ..."; the ranks waiting for it are not to blame), else srun's
  # report of a task that died on its own ("srun: error: N: task T: Segmentation fault", or Killed
  # before any rank's last words). A rank that reported is only named.
  node=$(grep -a 'hang watchdog: .*, busy in ' "$attempt_log" | grep -ao 'rank [0-9]* on node [^:]*' | head -1)
  failed=${node##* on node }
  if [ -z "$failed" ] && ! grep -aq 'rank [0-9]* on node [^:]*: error' "$attempt_log"; then
    failed=$(sed -n 's/^srun: error: \([^:]*\): tasks\{0,1\} [0-9-]*: \(Killed\|Segmentation\|Aborted\|Bus error\).*/\1/p' "$attempt_log" | head -1)
  fi
  [ -n "$node" ] || node=$(grep -ao 'rank [0-9]* on node [^:]*' "$attempt_log" | head -1)
  why="exit $rc$([ "$rc" -eq 4 ] && echo ': a hang')${node:+, reported by $node}${failed:+; failed node $failed}"
  if [ "$restarts" -ge "${DTRAIN_MAX_RESTARTS:-3}" ]; then
    echo "dtrain job: step failed ($why); DTRAIN_MAX_RESTARTS=${DTRAIN_MAX_RESTARTS:-3} restarts made: giving up"; break
  fi
  if [ "$restarts" -gt 0 ] && [ "$(latest)" = "$before" ]; then
    echo "dtrain job: step failed ($why) before any new checkpoint since the last restart: not restarting it again"; break
  fi
  restarts=$((restarts + 1))
  # Fewer ranks need a layout chosen for them: only a run with system.layout = auto leaves a node behind.
  if [ "${DTRAIN_EXCLUDE_FAILED:-1}" = 1 ] && [ -n "$failed" ] && [ "$nodes" -gt 1 ] && [ "$layout_mode" = auto ]; then
    nodes=$((nodes - 1)) excluded=${excluded:+$excluded,}$failed
    place=(-N "$nodes" -n $((nodes * per_node)) --exclude="$excluded")
    echo "dtrain job: leaving node $failed behind: the restart runs on $nodes node(s), $((nodes * per_node)) ranks"
  fi
  echo "dtrain job: step failed ($why); restart $restarts of ${DTRAIN_MAX_RESTARTS:-3} in ${wait_s} s from ${ckpt_dir:+$ckpt_dir/}$(latest || true)"
  sleep "$wait_s" &
  wait $!  # a stop signal interrupts the back-off (the trap runs at once)
  if [ "$stop" -eq 1 ]; then
    echo "dtrain job: stop signal during the back-off: requeueing from ${ckpt_dir:+$ckpt_dir/}$(latest || true) instead"
    rc=3; break
  fi
  wait_s=$((wait_s * 2))
done
rm -f "$attempt_log"
if [ "$rc" -eq 3 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt "${DTRAIN_MAX_REQUEUES:-10}" ]; then
  echo "dtrain job: checkpoint saved on preemption; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"

#!/usr/bin/env bash
# The body shared by dtrain's sbatch scripts (sourced by them, not run by hand): loads the module,
# prints the resolved layout, launches `srun dtrain "$INPUT"`, and requeues the job when dtrain stopped
# on a preemption signal (exit 3) after saving a checkpoint. The requeued job resumes from `latest`
# (checkpoint.load = auto), keeps its job id and appends to the same log (--open-mode=append).
# A failure a restart may clear (dtrain's exit 4, a hang; 1, one rank's failure; a rank or node lost)
# starts the step again inside the allocation, resuming from `latest`, after a back-off, at most
# DTRAIN_MAX_RESTARTS times. Bad input (2) and a non-finite step (5) are never retried, and neither is a
# failure that made no checkpoint since the last restart (it would only fail again).
# The node of a failure is named by dtrain's last words (a rank stuck outside communication), by srun (a
# task killed; "Node failure on N") or by Slurm (a node it took out of the allocation, or shows down,
# drained or not responding). With system.layout = auto the restart leaves it behind when the planner
# finds a layout for the nodes left. A node Slurm holds down or took away that the nodes left cannot do
# without (a manual layout needs every node; no layout fits the rest) makes the job requeue itself with
# the node added to its ExcNodeList; the requeued job runs on the nodes it is given then (at most
# DTRAIN_MAX_REQUEUES times, and not again without a new checkpoint). The sbatch scripts ask for
# --no-kill so that a node's failure does not end the allocation of the nodes left.
# Exit status: dtrain's, or 6 when a rank or node was lost and the job script gave up.
#
# Environment (all optional):
#   INPUT                  input.ini (default: inputs/tiny.ini, or the script's first argument)
#   DTRAIN_HOME            checkout or install prefix (default: the directory above slurm/)
#   DTRAIN_MODULE          module to load (default: dtrain); DTRAIN_MODULEPATH adds a module directory
#   DTRAIN_SRUN_ARGS       extra srun arguments (default: --mpi=pmix; sites with MpiDefault=pmix may clear it)
#   DTRAIN_ARGS            extra dtrain arguments, e.g. "--training.train_iters=100"
#   DTRAIN_MAX_REQUEUES    requeue at most this many times (default 10)
#   DTRAIN_MAX_RESTARTS    restart a failed step at most this many times in the allocation (default 3)
#   DTRAIN_RESTART_WAIT_S  seconds before the first restart, doubling after each (default 5; fractions too)
#   DTRAIN_EXCLUDE_FAILED  1 (default): leave the node of a failure behind (srun --exclude with
#                          system.layout = auto; a requeue with ExcNodeList when the nodes left are too few);
#                          0: restart on the same nodes
set -uo pipefail
# The variables read below, checked first: a bad value is one message and exit 2, not a failure later.
check_var() {  # NAME PATTERN DESCRIPTION DEFAULT
  local value=${!1:-$4}
  [[ $value =~ $2 ]] || { echo "dtrain job: $1=$value: must be $3" >&2; exit 2; }
}
check_var DTRAIN_MAX_RESTARTS '^[0-9]+$' 'a whole number of restarts >= 0' 3
check_var DTRAIN_MAX_REQUEUES '^[0-9]+$' 'a whole number of requeues >= 0' 10
check_var DTRAIN_RESTART_WAIT_S '^[0-9]+([.][0-9]+)?$' 'a number of seconds >= 0 (e.g. 5 or 0.5)' 5
check_var DTRAIN_EXCLUDE_FAILED '^[01]$' '1 (leave a failed node behind) or 0' 1
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

# The layout this allocation gives, before any compute is spent. A dry run that fails ends the job with
# its status, the step would fail the same way: at once for bad input (exit 2, its message above), after
# a second try for anything else (a start-up that failed).
srun_args=(${DTRAIN_SRUN_ARGS---mpi=pmix})
# "${a[@]+"${a[@]}"}": an empty array expands to nothing under set -u on bash < 4.4 as well.
# shellcheck disable=SC2086
dry=$(srun ${srun_args[@]+"${srun_args[@]}"} dtrain --dry-run "$input" ${DTRAIN_ARGS:-})
dry_rc=$?
if [ $dry_rc -ne 0 ] && [ $dry_rc -ne 2 ]; then
  sleep 2
  # shellcheck disable=SC2086
  dry=$(srun ${srun_args[@]+"${srun_args[@]}"} dtrain --dry-run "$input" ${DTRAIN_ARGS:-})
  dry_rc=$?
fi
if [ $dry_rc -ne 0 ]; then
  echo "dtrain job: the dry run failed (exit $dry_rc$([ $dry_rc -eq 2 ] && echo ': bad input'); its error is above): not starting the job" >&2
  exit "$dry_rc"
fi
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
# Slurm's view: the nodes now in the allocation (Slurm takes a failed node out of a --no-kill job), the
# job's ExcNodeList, and which of the nodes named are down, drained, failing or not responding (sinfo's
# compact state ends in * when the node does not respond).
job_field() { scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | grep -v '^(null)$'; }
# The allocation's nodes as Slurm sees them now, asked up to 3 times a second apart; nothing and status 1
# when the controller does not answer (a timeout during a node failure): no answer is not "no nodes".
job_nodes() {
  local n try
  for try in 1 2 3; do
    n=$(job_field NodeList)
    [ -n "$n" ] && { echo "$n"; return 0; }
    [ $try -lt 3 ] && sleep 1
  done
  return 1
}
unusable() { [ -n "$1" ] && sinfo -h -N -n "$1" -o '%N %t' 2>/dev/null |
               awk '$2 ~ /\*$/ || $2 ~ /^(down|drain|drng|fail|maint|boot|pow|inval|futr)/ {print $1}' | sort -u | paste -sd, -; }
hosts() { [ -n "$1" ] && scontrol show hostnames "$1" 2>/dev/null; true; }  # one node name per line
count_nodes() { hosts "$1" | grep -c .; }
# The nodes the steps run on: the allocation's at the start, less those left behind.
placed() { hosts "${SLURM_JOB_NODELIST:-}" | grep -vxF -f <(tr ',' '\n' <<<"$excluded") | paste -sd, -; }
attempt_log=$(mktemp "${TMPDIR:-/tmp}/dtrain-attempt.XXXXXX")
restarts=0 wait_s=${DTRAIN_RESTART_WAIT_S:-5}
nodes=${SLURM_JOB_NUM_NODES:-1} per_node=$(( ${SLURM_NTASKS:-1} / ${SLURM_JOB_NUM_NODES:-1} )) excluded="" requeue_without="" lost=0
place=()  # srun's node, task and exclusion arguments once a node is left behind
while true; do
  before=$(latest)
  # --kill-on-bad-exit=1 ends the job at once when a rank dies (a crash, an out-of-memory kill); without
  # it the other ranks would wait in their next collective for system.collective_timeout_s (300 s).
  # The step's output also goes to a file, where its ranks' last words are looked up; the pipeline's
  # status is srun's (pipefail), and waiting for it waits for tee too.
  # shellcheck disable=SC2086
  # The subshell's status is srun's alone: a failing tee (the log's disk full) warns and goes on copying
  # to the job's output, and does not replace dtrain's exit code.
  (
    srun ${srun_args[@]+"${srun_args[@]}"} ${place[@]+"${place[@]}"} --kill-on-bad-exit=1 dtrain "$input" ${DTRAIN_ARGS:-} 2>&1 |
      tee --output-error=warn "$attempt_log"
    exit "${PIPESTATUS[0]}"
  ) &
  step=$!
  wait $step; rc=$?
  while kill -0 $step 2>/dev/null; do wait $step; rc=$?; done   # wait again if a trapped signal interrupted it
  wait $step 2>/dev/null; rc=$?  # the step's own status (bash keeps it), also when a signal cut the last wait
  failed_at=$(date +%s.%N)
  case $rc in
    0 | 3) lost=0; break ;;
    2) echo "dtrain job: bad input (exit 2): not restarted"; lost=0; break ;;
    5) echo "dtrain job: a non-finite step (exit 5): not restarted (see training.on_nonfinite)"; lost=0; break ;;
  esac
  # The failure's class and node. A rank the watchdog found stuck outside communication ("rank R on node
  # N: error: hang watchdog: ... busy in ..."; the ranks waiting for it are not to blame); else a node
  # Slurm declared failed ("srun: error: Node failure on N"); else a task that died on its own
  # ("srun: error: N: task T: Killed", before any rank's last words); else a node of the allocation that
  # Slurm's state shows unusable. A rank that reported is only named.
  node=$(grep -a 'hang watchdog: .*, busy in ' "$attempt_log" | grep -ao 'rank [0-9]* on node [^:]*' | head -1)
  failed=${node##* on node } class="a rank failed (exit $rc)" lost=0
  [ "$rc" -eq 4 ] && class="a hang (exit 4)"
  slurm_failed=$(sed -n 's/^srun: error: Node failure on \([^ ]*\).*/\1/p' "$attempt_log" | sort -u | paste -sd, -)
  if [ -n "$slurm_failed" ]; then
    class="node lost (Slurm: node failure on $slurm_failed)" lost=1
    [ -n "$failed" ] || failed=$slurm_failed
  elif [ -z "$failed" ] && ! grep -aq 'rank [0-9]* on node [^:]*: error' "$attempt_log"; then
    failed=$(sed -n 's/^srun: error: \([^:]*\): tasks\{0,1\} [0-9-]*: \(Killed\|Segmentation\|Aborted\|Bus error\).*/\1/p' "$attempt_log" | head -1)
    [ -n "$failed" ] && class="rank lost (a task on $failed died: $(grep -ao "srun: error: $failed: tasks\{0,1\} [0-9-]*: [A-Za-z ]*" "$attempt_log" | head -1 | sed 's/^srun: error: [^:]*: //'))" lost=1
  fi
  # Slurm's verdict on the nodes the step ran on: one it took out of the allocation (a --no-kill job
  # keeps running without it), or one it shows down, drained or not responding.
  on=$(placed) missing=""
  if now=$(job_nodes); then
    missing=$(grep -vxF -f <(hosts "$now") <(hosts "$on") | paste -sd, -)
  else
    echo "dtrain job: Slurm's controller did not answer 'scontrol show job': which nodes it took away is not known"
  fi
  if [ -z "$failed" ] && [ -n "$missing" ]; then
    failed=$missing class="$class; Slurm took $missing out of the allocation" lost=1
  elif [ -z "$failed" ]; then
    failed=$(unusable "$on")
    [ -n "$failed" ] && class="$class; Slurm shows $failed unusable" lost=1
  fi
  [ -n "$node" ] || node=$(grep -ao 'rank [0-9]* on node [^:]*' "$attempt_log" | head -1)
  echo "dtrain job: step failed at $(date -d "@$failed_at" +%T.%1N): $class${node:+, reported by $node}${failed:+; failed node $failed}"
  if [ "$stop" -eq 1 ]; then echo "dtrain job: a stop signal came first: not restarted"; break; fi
  # A node Slurm holds down or took away cannot run ranks again: the job goes on without it, on the
  # nodes left when system.layout = auto finds a layout for them, else (a manual layout needs every
  # node) in another allocation: the job requeues itself with the node in its ExcNodeList. That has its
  # own budget (DTRAIN_MAX_REQUEUES) and is not repeated without a new checkpoint.
  gone=""
  if [ "${DTRAIN_EXCLUDE_FAILED:-1}" = 1 ] && [ -n "$failed" ]; then
    gone=$( { hosts "$(unusable "$failed")"; hosts "$failed" | grep -xF -f <(tr ',' '\n' <<<"$missing"); } | sort -u | paste -sd, -)
  fi
  left=$(( nodes - $(count_nodes "$failed") ))
  try_place=(-N "$left" -n $((left * per_node)) --exclude="${excluded:+$excluded,}$failed")
  shrink=0
  if [ -n "$failed" ] && [ "${DTRAIN_EXCLUDE_FAILED:-1}" = 1 ] && [ "$layout_mode" = auto ] && [ "$left" -ge 1 ]; then
    # shellcheck disable=SC2086
    if fit=$(srun ${srun_args[@]+"${srun_args[@]}"} "${try_place[@]}" dtrain --dry-run "$input" ${DTRAIN_ARGS:-} 2>&1); then
      shrink=1
    else
      echo "dtrain job: the $left node(s) left cannot run the job: $(grep -a 'error' <<<"$fit" | head -1)"
    fi
  fi
  if [ -n "$gone" ] && [ "$shrink" -eq 0 ]; then
    [ "$layout_mode" = auto ] || echo "dtrain job: node $gone is gone from Slurm's view and the layout (system.layout = $layout_mode) needs every node"
    requeue_without=${excluded:+$excluded,}$gone
    break
  fi
  if [ "$restarts" -ge "${DTRAIN_MAX_RESTARTS:-3}" ]; then
    echo "dtrain job: DTRAIN_MAX_RESTARTS=${DTRAIN_MAX_RESTARTS:-3} restarts made: giving up"; break
  fi
  # (A restart on fewer nodes is a new attempt, whatever the last one made.)
  if [ "$restarts" -gt 0 ] && [ "$shrink" -eq 0 ] && [ "$(latest)" = "$before" ]; then
    echo "dtrain job: no new checkpoint since the last restart: not restarting it again"; break
  fi
  if [ "$shrink" -eq 1 ]; then
    nodes=$left excluded=${excluded:+$excluded,}$failed place=("${try_place[@]}")
    echo "dtrain job: leaving node $failed behind: the restart runs on $nodes node(s), $((nodes * per_node)) ranks"
  fi
  restarts=$((restarts + 1))
  echo "dtrain job: restart $restarts of ${DTRAIN_MAX_RESTARTS:-3} in ${wait_s} s from ${ckpt_dir:+$ckpt_dir/}$(latest || true)"
  sleep "$wait_s" &
  wait $!  # a stop signal interrupts the back-off (the trap runs at once)
  if [ "$stop" -eq 1 ]; then
    echo "dtrain job: stop signal during the back-off: requeueing from ${ckpt_dir:+$ckpt_dir/}$(latest || true) instead"
    rc=3; break
  fi
  echo "dtrain job: restarting, $(awk -v t="$failed_at" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - t}') s after the step failed"
  wait_s=$(awk -v w="$wait_s" 'BEGIN {print w * 2}')
done
rm -f "$attempt_log"
# The checkpoint the last requeue without a node resumed from (checkpoint.dir/.dtrain-requeued: job id
# and checkpoint): a requeue that made nothing new since is not repeated.
requeued_from() { [ -n "$ckpt_dir" ] && cat "$ckpt_dir/.dtrain-requeued" 2>/dev/null; }
if [ -n "$requeue_without" ]; then
  if [ "${SLURM_RESTART_COUNT:-0}" -ge "${DTRAIN_MAX_REQUEUES:-10}" ]; then
    echo "dtrain job: DTRAIN_MAX_REQUEUES=${DTRAIN_MAX_REQUEUES:-10} requeues made: giving up"
  elif [ -n "$(latest)" ] && [ "$(requeued_from)" = "$SLURM_JOB_ID $(latest)" ]; then
    echo "dtrain job: no new checkpoint since the last requeue without a node: not requeueing again"
  else
    [ -n "$ckpt_dir" ] && echo "$SLURM_JOB_ID $(latest)" > "$ckpt_dir/.dtrain-requeued"
    exclude=$(scontrol show hostlist "$({ job_field ExcNodeList | xargs -r scontrol show hostnames; scontrol show hostnames "$requeue_without"; } |
                                        sort -u | paste -sd, -)")
    echo "dtrain job: requeueing job $SLURM_JOB_ID without node(s) $requeue_without (ExcNodeList=$exclude); it resumes from ${ckpt_dir:+$ckpt_dir/}$(latest || true) on the nodes it is given"
    # Slurm changes ExcNodeList only once the job is pending again: right after the requeue, or, for a job
    # that lost a node (Slurm resized it) on a cluster without accounting, only once this instance has
    # ended. The requeue signals this script to end; the signals are ignored and the update is retried
    # (each try waits up to 5 s in slurmctld) until it is made or KillWait's SIGKILL ends the script.
    trap '' TERM USR1
    if out=$(scontrol requeue "$SLURM_JOB_ID" 2>&1); then
      deadline=$(( $(date +%s) + 60 ))
      until out=$(scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="$exclude" 2>&1); do
        [ "$(date +%s)" -lt "$deadline" ] || break
        sleep 0.1
      done
    fi
    [ -z "$out" ] || { echo "dtrain job: the requeue without $requeue_without failed: $out"; [ "$lost" -eq 1 ] && rc=6; }
    exit "$rc"
  fi
fi
if [ "$rc" -eq 3 ] && [ "${SLURM_RESTART_COUNT:-0}" -lt "${DTRAIN_MAX_REQUEUES:-10}" ]; then
  echo "dtrain job: checkpoint saved on preemption; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
[ "$lost" -eq 1 ] && [ "$rc" -ne 3 ] && rc=6
exit "$rc"

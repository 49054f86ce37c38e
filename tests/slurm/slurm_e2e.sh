#!/usr/bin/env bash
# dtrain on a real Slurm (tools/local-slurm: two slurmd nodes on this machine), as users run it.
#   slurm_e2e.sh CASE SOURCE_DIR BUILD_DIR
#   srun             srun -N2 -n4 dtrain: ranks 0-1 on node1 and 2-3 on node2, losses equal mpirun's bit for bit
#   sbatch           sbatch --wait slurm/train_2node.sbatch with the CPU input (2 nodes x 2 tasks, no GPUs):
#                    completes, its log shows the layout, its losses equal mpirun's bit for bit
#   crash_loop       a crash loop stops: rank 2 of a 2 x 2 job killed twice, each time after a new checkpoint,
#                    with DTRAIN_MAX_RESTARTS=1: one restart, then the job gives up with exit 6 (a rank lost);
#                    and a rank that stalls at step 3 on every attempt: one restart, which publishes nothing
#                    new, and no other (exit 4)
#   kill_rank        SIGKILL of one rank of an srun job: the whole job ends within 60 s naming the task,
#                    and the last published checkpoint still verifies
#   preempt_requeue  scancel --signal=USR1 mid-run: checkpoint, exit 3, the job requeues itself, resumes from
#                    latest into the same log, and its losses equal an uninterrupted mpirun run bit for bit
#   restart_hang     a rank stalls once at step 5 (debug.stall_once_file): the watchdog ends the step with
#                    exit 4, the job script restarts it inside the allocation from latest (step 4), naming
#                    the stuck rank's node (not a waiting rank's) and keeping the nodes (layout manual), and the job completes with the losses of an
#                    uninterrupted mpirun run bit for bit; then a job with bad input runs once (exit 2)
#   node_lost        kill -9 of rank 2 (on node2) of a 2 x 2 job with system.layout=auto: the job script
#                    restarts the step on node1 alone, the planner chooses a layout for its 2 ranks, the run
#                    resumes from latest and completes; its last loss within the fp32 reordering bound of an
#                    uninterrupted 4-rank run's (reorder_tol 1024 tokens, 16 steps); the time lost, by part
#   node_down        the same job, but node2 stops as a machine does: its slurmd killed and its ranks and
#                    slurmstepd frozen; Slurm declares the node failed, and the job goes on as in node_lost
#   requeue_excluded node2 stops under a 2 x 2 job with a manual layout (it needs both nodes): the job
#                    requeues itself with ExcNodeList=node2, runs again on node1 and node3, resumes from
#                    latest, and its losses equal an uninterrupted mpirun run's bit for bit
set -u
case_name=$1 src=$2 build=$3
source "$src/tests/e2e/lib.sh"
state=$work/slurm
on_exit+=('"$src/tools/local-slurm" down "$state" > /dev/null 2>&1')
fail() { echo "FAIL: $*"; [ -d "$state/log" ] && tail -n 5 "$state"/log/*.log; exit 1; }
# CTest kills a test at its timeout (300 s) with no chance to clean up, and a cluster or job step left
# running breaks every later Slurm test (the port in use) and takes the CPU: at 280 s the case fails
# here instead, and the exit trap brings this cluster and its job steps down.
trap 'fail "the case ran past 280 s (CTest stops it at 300 s)"' TERM
( trap - EXIT; trap 'exit 0' TERM; sleep 280 & wait $!; kill -TERM $$ ) > /dev/null 2>&1 &
deadline_watch=$!
on_exit+=('kill "$deadline_watch" 2>/dev/null')
"$src/tools/local-slurm" up "$state" > "$work/up.log" 2>&1 || { cat "$work/up.log"; fail "local-slurm up"; }
export SLURM_CONF=$state/etc/slurm.conf
make_small_data "$build/tools/dtrain-data"
common="--data.path=$work/d --model.global_batch_size=8 --model.micro_batch_size=1 --training.eval_interval=0 --logging.log_interval=1 $no_sample $given_peak"
# The loss of each step in order; a step logged twice (redone after a restart from an earlier checkpoint)
# once, and "differs" when its two losses do.
losses() {
  grep -o '"step": [0-9]*, "loss": [0-9.e+-]*' "$1" |
    awk '{ s = $2 + 0; if (s in v) { if (v[s] != $4) v[s] = "differs" } else { v[s] = $4; order[++n] = s } } END { for (i = 1; i <= n; i++) print v[order[i]] }'
}
reference() {  # the same run under mpirun on this machine
  timeout -k 5 120 mpirun -np 4 "$build/dtrain" "$src/inputs/tiny.ini" $common --training.train_iters="$1" --checkpoint.dir= \
    "--logging.metrics_file=$work/mpirun.jsonl" > "$work/mpirun.log" 2>&1 || { cat "$work/mpirun.log"; fail "mpirun reference"; }
}
same_losses() {  # same_losses FILE
  [ "$(losses "$1" | wc -l)" -gt 0 ] || fail "no losses in $1"
  diff <(losses "$1") <(losses "$work/mpirun.jsonl") > /dev/null || { paste <(losses "$1") <(losses "$work/mpirun.jsonl"); fail "losses differ from mpirun's"; }
  echo "  $(losses "$1" | wc -l) losses equal to mpirun's bit for bit"
}
wait_job() {  # wait_job ID: until COMPLETED/FAILED/...; polls scontrol (sbatch --wait polls too slowly)
  local st=""
  for _ in $(seq 1 1200); do
    st=$(scontrol show job -o "$1" | grep -o 'JobState=[A-Z_]*')
    case $st in *COMPLETED|*FAILED|*CANCELLED|*TIMEOUT|*NODE_FAIL) echo "$st"; return ;; esac
    sleep 0.2
  done
  echo "$st (still running after 240 s)"
}
# Open MPI 4.1.4's rare start-up race between two nodes: a rank segfaults at address (nil) inside
# MPI_Init, before dtrain prints anything (about 1 launch in 250 here). A launch or a whole job case
# that fails this way is run once more; any other failure stands. A job script's restart is a launch of
# its own (restart_hang once met the race there, after the first launch's steps).
startup_race() {  # startup_race LOG...: the segfault, with no training step logged before it in its launch
  local f
  for f in "$@"; do
    [ -f "$f" ] && awk '/^dtrain job: restarting/ { stepped = 0 } /^step / { stepped = 1 }
      /Failing at address: \(nil\)/ && !stepped { found = 1 } END { exit !found }' "$f" && return 0
  done
  return 1
}
srun_retry() {  # srun_retry LOG ARGS...
  local log=$1; shift
  timeout -k 5 120 srun "$@" > "$log" 2>&1 && return 0
  if startup_race "$log" && ! grep -q '^dtrain' "$log"; then
    echo "  (Open MPI start-up segfault seen; retrying once)"
    timeout -k 5 120 srun "$@" > "$log" 2>&1 && return 0
  fi
  return 1
}
rank_pid() {  # rank_pid PATTERN RANK: the dtrain-main process of that Slurm rank whose command line has PATTERN
  local p
  for p in $(pgrep -f -- "$1"); do
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_PROCID=$2" && [ "$(cat /proc/$p/comm)" = dtrain-main ] && echo "$p"
  done | head -1
}
node_stops() {  # node_stops NODE: its slurmd killed, its job steps' processes frozen (a machine that stopped)
  kill -9 "$(cat "$state/run/slurmd-$1.pid")"
  local d pid parent
  for d in /proc/[0-9]*; do
    { tr '\0' '\n' < "$d/environ"; } 2>/dev/null | grep -qx "SLURMD_NODENAME=$1" || continue
    pid=${d#/proc/} parent=$(awk '{print $4}' "$d/stat" 2>/dev/null)
    kill -STOP "$pid" 2>/dev/null
    [ "$(cat "/proc/$parent/comm" 2>/dev/null)" = slurmstepd ] && kill -STOP "$parent"
  done
}
time_lost() {  # time_lost LOG JSONL FAILED_AT: what the restart cost, by part
  local failed ended
  failed=$(date -d "@$3" +%s.%N)
  ended=$(date -d "$(sed -n 's/^dtrain job: step failed at \([0-9:.]*\):.*/\1/p' "$1" | head -1)" +%s.%N)
  awk -v f="$failed" -v e="$ended" -v relaunch="$(sed -n 's/^dtrain job: restarting, \([0-9.]*\) s after.*/\1/p' "$1" | head -1)" \
      -v startup="$(grep -a '^start-up: .*loading the checkpoint' "$1" | tail -1 | awk '{print $2}')" \
      -v load="$(grep -a '^start-up: .*loading the checkpoint' "$1" | tail -1 | sed 's/.*of which \([0-9.]*\) s loading.*/\1/')" \
      'BEGIN { printf "  time lost: %.1f s until the step ended, %.1f s to the relaunch (back-off and checks), start-up %.2f s (of which loading %.2f s)", e - f, relaunch, startup, load }'
  # The steps done twice: those logged before the failure and again after the resume.
  grep -o '"step": [0-9]*, [^}]*"step_s": [0-9.]*' "$2" | awk '{ s = $2 + 0; t = $NF + 0; if (s in seen) { n++; sum += t } seen[s] = 1 }
      END { printf ", %d step(s) redone in %.2f s\n", n, sum }'
}
placement_ok() {  # ranks 0-1 on node1, 2-3 on node2 in a dry-run report
  for r in 0 1; do grep -q "rank $r: node node1 " "$1" || return 1; done
  for r in 2 3; do grep -q "rank $r: node node2 " "$1" || return 1; done
}

# submit ENV DTRAIN_ARGS: sbatch slurm/train_cpu.sbatch on inputs/tiny.ini from $run, with ENV (more
# VAR=value exports, comma-separated, or empty) and DTRAIN_ARGS; prints the job id.
submit() {
  mkdir -p "$run/logs"
  cd "$run" && sbatch --parsable --chdir="$run" --export="ALL,DTRAIN_HOME=$src${1:+,$1},DTRAIN_ARGS=$2" \
    "$src/slurm/train_cpu.sbatch" "$src/inputs/tiny.ini"
}
# until_progress STEPS: waits (90 s at most) for a published checkpoint and STEPS logged steps.
until_progress() {
  for _ in $(seq 1 900); do [ -s "$run/ck/latest" ] && [ "$(grep -c '"step"' "$run/job.jsonl" 2>/dev/null || true)" -ge "$1" ] && break; sleep 0.1; done
}
# The cases that start a job (sbatch, preempt_requeue, kill_rank): outputs under $run, one directory
# per attempt; fail() inside exits the attempt's subshell.
job_case() {
  case $case_name in
    sbatch)
      mkdir -p "$run/logs"
      # The GPU script with the CPU input: the sbatch command line overrides its GPU-sized directives.
      out=$(cd "$run" && timeout 240 sbatch --wait --chdir="$run" --gpus-per-node=0 --ntasks-per-node=2 --cpus-per-task=1 \
            --export=ALL,DTRAIN_HOME="$src",DTRAIN_ARGS="$common --training.train_iters=6 --checkpoint.dir= --logging.metrics_file=$run/sbatch.jsonl" \
            "$src/slurm/train_2node.sbatch" "$src/inputs/tiny.ini") || fail "sbatch --wait: the job failed ($out)"
      jid=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' <<<"$out")
      log=$run/logs/dtrain-$jid.out
      grep -av '^sample' "$log"
      grep -q "launcher srun, 4 ranks on 2 node(s), Slurm job $jid" "$log" || fail "log does not show 2 nodes x 2 ranks"
      placement_ok "$log" || fail "ranks are not placed 0-1 on node1, 2-3 on node2"
      reference 6
      same_losses "$run/sbatch.jsonl" ;;
    preempt_requeue)
      jid=$(submit "" "$common --training.train_iters=20 --checkpoint.dir=$run/ck --logging.metrics_file=$run/job.jsonl") || fail "sbatch"
      for _ in $(seq 1 600); do [ "$(grep -c '"step"' "$run/job.jsonl" 2>/dev/null || true)" -ge 4 ] && break; sleep 0.1; done
      scancel --signal=USR1 "$jid" || fail "scancel --signal=USR1"
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -av '^step\|^sample' "$log"
      [ "$st" = JobState=COMPLETED ] || fail "job $jid ended $st"
      grep -q "received SIGUSR1 - saved step" "$log" || fail "no checkpoint on the signal"
      grep -q "requeueing job $jid" "$log" || fail "the job did not requeue itself"
      grep -q "dtrain job $jid (restart 1)" "$log" || fail "no second run of the same job in the same log"
      grep -q "checkpoint: resumed from .* at step" "$log" || fail "the requeued run did not resume"
      # The metrics file holds the steps before the stop and (appended) the ones after the resume.
      reference 20
      same_losses "$run/job.jsonl" ;;
    restart_hang)
      jid=$(submit "DTRAIN_RESTART_WAIT_S=1" "$common --training.train_iters=10 --checkpoint.dir=$run/ck --checkpoint.save_interval=2 --logging.metrics_file=$run/job.jsonl --debug.stall_rank=3 --debug.stall_at_step=5 --debug.stall_once_file=$run/stalled --system.step_timeout_s=4") || fail "sbatch"
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -av '^step\|^sample\|busy time' "$log" | tail -20
      [ "$st" = JobState=COMPLETED ] || fail "job $jid ended $st"
      # The stuck rank (3, on node2) is the one named: the ranks waiting for it report too.
      grep -q "dtrain job: step failed at .*: a hang (exit 4), reported by rank 3 on node node2; failed node node2" "$log" ||
        fail "the hang's stuck rank and node are not named"
      grep -q "dtrain job: restart 1 of 3 in 1 s from $run/ck/step_00000004" "$log" || fail "no restart after the hang"
      ! grep -q "leaving node" "$log" || fail "a run with layout=manual left a node behind"
      grep -q "checkpoint: resumed from .*step_00000004 at step 4" "$log" || fail "the restart did not resume from step 4"
      reference 10
      same_losses "$run/job.jsonl"
      # Bad input is not retried: the dry run refuses it once, exit 2, and no step runs.
      jid=$(submit "" "--training.no_such_key=1") || fail "sbatch"
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      [ "$st" = JobState=FAILED ] || fail "the bad-input job ended $st"
      grep -q "dtrain job: the dry run failed (exit 2: bad input" "$log" || { tail "$log"; fail "bad input was not refused once"; }
      [ "$(grep -c 'restart [0-9] of' "$log")" -eq 0 ] || fail "bad input was restarted" ;;
    node_lost | node_down)
      args="$common --training.train_iters=16 --checkpoint.dir=$run/ck --checkpoint.save_interval=2 $smooth_adam --system.layout=auto --system.cluster_file=$src/inputs/clusters/cpu-2core.ini"
      jid=$(submit "DTRAIN_RESTART_WAIT_S=1" "$args --logging.metrics_file=$run/job.jsonl") || fail "sbatch"
      until_progress 5
      victim=$(rank_pid "--logging.metrics_file=$run/job.jsonl" 2)
      [ -n "$victim" ] || fail "rank 2 not found"
      killed_at=$(grep -c '"step"' "$run/job.jsonl") saved=$(cat "$run/ck/latest") start=$(date +%s.%N)
      if [ "$case_name" = node_lost ]; then kill -9 "$victim"; else node_stops node2; fi
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -a "dtrain job\|layout auto\|resumed from\|srun: error\|^start-up" "$log"
      [ "$st" = JobState=COMPLETED ] || fail "job $jid ended $st"
      if [ "$case_name" = node_lost ]; then
        grep -q "step failed at .*: rank lost (a task on node2 died: task 2: Killed); failed node node2" "$log" || fail "the lost rank is not named"
      else
        grep -q "step failed at .*: node lost (Slurm: node failure on node2).*; failed node node2" "$log" || fail "Slurm's node failure is not named"
      fi
      grep -q "leaving node node2 behind: the restart runs on 1 node(s), 2 ranks" "$log" || fail "node2 was not left behind"
      grep -q "layout auto on .*(1 node(s) x 2 ranks)" "$log" || fail "no layout chosen for the 2 ranks left"
      grep -q "checkpoint: resumed from .* at step" "$log" || fail "the restart did not resume"
      echo "  failed after $killed_at logged steps with $saved published; the job completed $(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN {printf "%.0f", n - s}') s later on node1"
      time_lost "$log" "$run/job.jsonl" "$start"
      timeout -k 5 120 mpirun -np 4 "$build/dtrain" "$src/inputs/tiny.ini" $common --training.train_iters=16 --checkpoint.dir= $smooth_adam \
        "--logging.metrics_file=$work/uninterrupted.jsonl" > "$work/uninterrupted.log" 2>&1 || fail "the uninterrupted reference"
      want=$(losses "$work/uninterrupted.jsonl" | tail -1) got=$(losses "$run/job.jsonl" | tail -1) tol=$(reorder_tol 1024 16)
      awk -v a="$got" -v b="$want" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "  last loss %s, uninterrupted %s: relative %.2e (bound %s)\n", a, b, d / b, t; exit !(d / b <= t) }' ||
        fail "the restarted run's last loss is beyond the reordering bound" ;;
    requeue_excluded)
      jid=$(submit "DTRAIN_RESTART_WAIT_S=1" "$common --training.train_iters=12 --checkpoint.dir=$run/ck --checkpoint.save_interval=2 --logging.metrics_file=$run/job.jsonl") || fail "sbatch"
      until_progress 5
      [ -n "$(rank_pid "--logging.metrics_file=$run/job.jsonl" 2)" ] || fail "rank 2 not found"
      start=$(date +%s.%N)
      node_stops node2
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -a "dtrain job\|resumed from\|srun: error\|^start-up" "$log"
      [ "$st" = JobState=COMPLETED ] || fail "job $jid ended $st"
      grep -q "node lost (Slurm: node failure on node2)" "$log" || fail "Slurm's node failure is not named"
      grep -q "requeueing job $jid without node(s) node2 (ExcNodeList=node2)" "$log" || fail "the job did not requeue itself without node2"
      grep -q "dtrain job $jid (restart 1) on node\[1,3\]: 2 node(s), 4 task(s)" "$log" || fail "the requeued job did not run on node1 and node3"
      scontrol show job -o "$jid" | grep -q "ExcNodeList=node2 " || fail "ExcNodeList is not node2: $(scontrol show job -o "$jid" | grep -o 'ExcNodeList=[^ ]*')"
      grep -q "checkpoint: resumed from .* at step" "$log" || fail "the requeued job did not resume"
      echo "  the requeued job completed $(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN {printf "%.0f", n - s}') s after node2 stopped"
      reference 12
      same_losses "$run/job.jsonl" ;;
    crash_loop)
      jid=$(submit "DTRAIN_RESTART_WAIT_S=1,DTRAIN_MAX_RESTARTS=1" "$common --training.train_iters=400 --checkpoint.dir=$run/ck --checkpoint.save_interval=2 --logging.metrics_file=$run/job.jsonl") || fail "sbatch"
      for kill in 1 2; do
        # After a checkpoint newer than the one this attempt resumed from, with this attempt's rank 2
        # running (the killed attempt may still publish a save its ranks had all written).
        victim=
        for _ in $(seq 1 900); do
          if [ -s "$run/ck/latest" ] && [ "$(cat "$run/ck/latest")" \> "${seen:-}" ]; then
            victim=$(rank_pid "--logging.metrics_file=$run/job.jsonl" 2)
            [ -n "$victim" ] && [ "$victim" != "${killed:-}" ] && break
          fi
          sleep 0.1
        done
        seen=$(cat "$run/ck/latest")
        [ -n "$victim" ] && [ "$victim" != "${killed:-}" ] || fail "rank 2 not found before kill $kill"
        killed=$victim
        kill -9 "$victim"
        for _ in $(seq 1 600); do [ "$(rank_pid "--logging.metrics_file=$run/job.jsonl" 2)" != "$victim" ] && break; sleep 0.1; done
      done
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -a "dtrain job" "$log"
      [ "$st" = JobState=FAILED ] || fail "the crash-looping job ended $st"
      [ "$(grep -c 'restart [0-9] of' "$log")" -eq 1 ] || fail "not exactly one restart"
      grep -q "DTRAIN_MAX_RESTARTS=1 restarts made: giving up" "$log" || fail "the budget did not stop the loop"
      scontrol show job -o "$jid" | grep -q "ExitCode=6:0" || fail "exit status $(scontrol show job -o "$jid" | grep -o 'ExitCode=[^ ]*'), not 6 (a rank lost)"
      # No progress: the restart fails before publishing anything new, and there is no second one.
      jid=$(submit "DTRAIN_RESTART_WAIT_S=1" "$common --training.train_iters=10 --checkpoint.dir=$run/ck2 --checkpoint.save_interval=2 --debug.stall_rank=3 --debug.stall_at_step=3 --system.step_timeout_s=3") || fail "sbatch"
      st=$(wait_job "$jid")
      log=$run/logs/dtrain-cpu-$jid.out
      grep -a "dtrain job" "$log"
      [ "$st" = JobState=FAILED ] || fail "the job that makes no progress ended $st"
      [ "$(grep -c 'restart [0-9] of' "$log")" -eq 1 ] || fail "not exactly one restart"
      grep -q "no new checkpoint since the last restart: not restarting it again" "$log" || fail "the loop without progress was not stopped"
      scontrol show job -o "$jid" | grep -q "ExitCode=4:0" || fail "exit status $(scontrol show job -o "$jid" | grep -o 'ExitCode=[^ ]*'), not 4 (the hang)" ;;
    kill_rank)
      timeout -k 5 120 srun -N2 -n4 --kill-on-bad-exit=1 "$build/dtrain" "$src/inputs/tiny.ini" $common --training.train_iters=400 \
        --checkpoint.dir="$run/ck" --checkpoint.save_interval=2 "--logging.metrics_file=$run/k.jsonl" > "$run/srun.log" 2>&1 &
      runner=$!
      for _ in $(seq 1 600); do [ -s "$run/ck/latest" ] && [ "$(grep -c '"step"' "$run/k.jsonl" 2>/dev/null || true)" -ge 5 ] && break; sleep 0.1; done
      victim=$(rank_pid "--logging.metrics_file=$run/k.jsonl" 2)
      [ -n "$victim" ] || fail "rank 2 not found"
      start=$(date +%s)
      kill -9 "$victim"
      wait $runner
      elapsed=$(( $(date +%s) - start ))
      grep -av '^step\|^sample' "$run/srun.log" | tail -5
      [ $elapsed -le 60 ] || fail "the job took $elapsed s to end after the kill"
      grep -Eq "task 2: Killed|task 2.*(Killed|signal 9)" "$run/srun.log" || fail "srun's message does not name task 2"
      "$build/tools/ckpt-consolidate" "$run/ck" --verify || fail "the last published checkpoint does not verify"
      echo "  the job ended ${elapsed} s after rank 2 was killed; latest $(cat "$run/ck/latest") verifies" ;;
  esac
}

case $case_name in
  srun)
    srun_retry "$work/dry.log" -N2 -n4 "$build/dtrain" --dry-run "$src/inputs/tiny.ini" || { cat "$work/dry.log"; fail "srun --dry-run"; }
    grep -q "launcher srun, 4 ranks on 2 node(s), Slurm job" "$work/dry.log" || fail "dtrain does not see srun with 2 nodes"
    placement_ok "$work/dry.log" || { cat "$work/dry.log"; fail "ranks are not placed 0-1 on node1, 2-3 on node2"; }
    srun_retry "$work/srun.log" -N2 -n4 "$build/dtrain" "$src/inputs/tiny.ini" $common --training.train_iters=6 --checkpoint.dir= \
      "--logging.metrics_file=$work/srun.jsonl" || { cat "$work/srun.log"; fail "srun training"; }
    reference 6
    same_losses "$work/srun.jsonl"
    # down leaves nothing of this cluster behind
    "$src/tools/local-slurm" down "$state" > /dev/null || fail "local-slurm down"
    left=$(pgrep -af -- "$state" | grep -v "slurm_e2e.sh" || true)
    [ -z "$left" ] || fail "processes left after down: $left" ;;
  sbatch | preempt_requeue | restart_hang | node_lost | node_down | requeue_excluded | crash_loop | kill_rank)
    for attempt in 1 2; do
      run=$work/attempt$attempt
      mkdir -p "$run"
      ( job_case ) && break
      [ $attempt = 1 ] && startup_race "$run"/logs/*.out "$run/srun.log" || exit 1
      echo "  (Open MPI start-up segfault seen; running the case once more)"
    done ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS

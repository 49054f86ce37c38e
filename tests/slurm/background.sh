#!/usr/bin/env bash
# The Slurm scenarios (slurm_e2e.sh) run one after another in the background of the test suite, beside
# CTest's two slots instead of in one: they mostly wait (for Slurm to notice a node, for a requeue, for
# KillWait), and in a slot of their own they left a core idle for four minutes of every `ctest -j2`.
#   background.sh start RESULTS SOURCE_DIR BUILD_DIR CASE...   (CTest slurm_scenarios_start, first)
#       launches the runner, detached, and returns: each case in turn writes RESULTS/CASE.log, then
#       RESULTS/CASE.rc (its exit status)
#   background.sh await RESULTS CASE                           (CTest slurm_CASE)
#       waits for the case's result, prints its log and exits with its status: the test is the case
#   background.sh stop RESULTS                                 (start, first; or by hand)
#       ends a runner still going (an interrupted ctest): each case's own trap brings its cluster down
# To run one scenario in the foreground: tests/slurm/slurm_e2e.sh CASE SOURCE_DIR BUILD_DIR.
set -u
action=$1 results=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
case $action in
  start)
    src=$1 build=$2
    shift 2
    "$0" stop "$results" > /dev/null
    rm -rf "$results" && mkdir -p "$results" || exit 1
    # A session of its own, every descriptor closed: CTest waits for the test, not for the runner. A
    # higher priority (where allowed: root): the scenarios take little CPU, in bursts (their daemons, a
    # few training steps) whose timing matters, beside two CPU-bound tests that then wait a moment.
    setsid nice -n -10 "$0" run "$results" "$src" "$build" "$@" < /dev/null > "$results/runner.log" 2>&1 &
    for _ in $(seq 1 100); do [ -s "$results/runner.pid" ] && break; sleep 0.05; done
    echo "started the Slurm scenarios ($*) in the background; results in $results" ;;
  run)
    src=$1 build=$2
    shift 2
    echo $$ > "$results/runner.pid"  # the session's leader: stop signals the whole session
    for c in "$@"; do
      timeout -k 10 300 "$here/slurm_e2e.sh" "$c" "$src" "$build" > "$results/$c.log" 2>&1
      echo $? > "$results/$c.rc.tmp" && mv "$results/$c.rc.tmp" "$results/$c.rc"
    done ;;
  await)
    c=$1
    while [ ! -f "$results/$c.rc" ]; do
      if [ ! -f "$results/runner.pid" ] || ! kill -0 "$(cat "$results/runner.pid")" 2>/dev/null; then
        [ -f "$results/$c.rc" ] && break
        echo "FAIL: no runner produces the result of $c (slurm_scenarios_start did not run, or the runner died):"
        cat "$results/runner.log" 2>/dev/null
        exit 1
      fi
      sleep 1
    done
    cat "$results/$c.log"
    exit "$(cat "$results/$c.rc")" ;;
  stop)
    pid=$(cat "$results/runner.pid" 2>/dev/null) || exit 0
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null  # the runner's session: the case and what it started
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      echo "stopped the Slurm scenarios' runner"
    fi
    rm -f "$results/runner.pid" ;;
  *) echo "usage: background.sh start|await|stop RESULTS ..."; exit 2 ;;
esac

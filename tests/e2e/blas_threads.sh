#!/usr/bin/env bash
# system.threads_per_rank=64 on 2 ranks of a 2-core machine, under a 3 GB address-space limit per
# process: BLAS threads are capped at the cores each rank may run on, with one warning, and the run
# trains (it used to die in OpenBLAS's allocation for 64 threads before the watchdog ran).
#   blas_threads.sh DTRAIN DTRAIN_DATA SOURCE_DIR
set -u
dtrain=$1 tool=$2 src=$3
source "$(dirname "$0")/lib.sh"
make_small_data "$tool"
(ulimit -v 3000000
 timeout -k 5 60 mpirun -np 2 "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --system.tensor_model_parallel_size=1 \
   --system.pipeline_model_parallel_size=1 --system.threads_per_rank=64 --training.train_iters=3 --training.eval_interval=0 \
   --checkpoint.dir= --logging.log_interval=1 "$no_sample" "$given_peak") > "$work/out.log" 2>&1
rc=$?
cat "$work/out.log" | grep -v '^sample'
[ $rc -eq 0 ] || fail "exited $rc"
[ "$(grep -c 'warning: system.threads_per_rank=64 is more than the [0-9]* core(s) this rank may run on; using [0-9]* BLAS thread(s)' "$work/out.log")" -eq 1 ] ||
  fail "no single warning about the capped thread count"
grep -q '^step 3/3' "$work/out.log" || fail "did not train"
echo PASS

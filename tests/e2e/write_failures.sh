#!/usr/bin/env bash
# Failed writes as whole processes meet them: a full disk of any size, an HDF5 close that fails, a
# checkpoint.dir nobody can write. Every case ends with a complete file or with one clear error, exit 2
# on every rank and nothing left behind: never a signal, never a file that claims to be complete.
#   write_failures.sh CASE DTRAIN DTRAIN_DATA CKPT_CONSOLIDATE FAIL_IO_LIBRARY SOURCE_DIR
# Cases:
#   import_hf_any_disk_size  ckpt-consolidate --import-hf onto tmpfs filesystems of every size from too
#                        small to large enough (4 KiB steps): each either writes the file h5diff finds equal
#                        to the import on a large disk, or exits 2 with one error and leaves nothing (a full
#                        disk used to leave a file with zeros for its last tensors, reported as written)
#   save_close_fails     a checkpoint save whose HDF5 metadata cannot be written when the shard closes
#                        (fail_io: the superblock at the close), at 2 ranks: exit 2 on both, the previous
#                        checkpoint stays latest (the close's failure used to crash HDF5 at exit, 139);
#                        and checkpoint.dir on an 800 KB filesystem, which a first save overfills
#   init_from_unwritable checkpoint.init_from=hf:DIR with checkpoint.dir a file, or on a read-only filesystem:
#                        one error naming checkpoint.dir and exit 2 on every rank (was an internal error and
#                        MPI_Abort)
#   consolidate_fsync_fails  ckpt-consolidate --out by 2 ranks (parallel HDF5) whose fsync fails: exit 2 on
#                        both, no file
set -u
case_name=$1 dtrain=$2 tool=$3 consolidate=$4 fail_io=$5 src=$6
here=$(dirname "$0")
source "$here/lib.sh"
on_exit+=('mountpoint -q "$work/small" 2>/dev/null && umount "$work/small"')
mkdir -p "$work/small"
small_fs() {  # small_fs OPTIONS: a fresh tmpfs at $work/small, or the test skips
  mountpoint -q "$work/small" && umount "$work/small"
  mount -t tmpfs -o "$1" tmpfs "$work/small" 2>/dev/null || { echo "SKIP: cannot mount a small tmpfs here"; exit 77; }
}
# every_rank_exited CODE NP LOG: each of NP ranks printed "rank-exit R CODE"
every_rank_exited() { [ "$(grep -c "^rank-exit [0-9]* $1$" "$3")" -eq "$2" ]; }
# on_ranks NP LOG RULE COMMAND...: COMMAND on NP ranks, each to its own end ("rank-exit R CODE" lines in
# LOG); a non-empty RULE preloads tests/support/fail_io.c with FAIL_IO=RULE, and $work/injected records
# that it failed a call.
on_ranks() {
  local np=$1 log=$2 rule=$3
  shift 3
  # shellcheck disable=SC2086
  OMPI_MCA_orte_abort_on_non_zero_status=0 timeout -k 5 120 mpirun -np "$np" \
    ${rule:+-x LD_PRELOAD=$fail_io -x FAIL_IO=$rule -x FAIL_IO_COUNT=$work/injected} \
    bash -c '"$@"; echo "rank-exit $OMPI_COMM_WORLD_RANK $?"' _ "$@" > "$log" 2>&1
  grep -v '^step\|^  \[' "$log"
}
train_ranks() {  # train_ranks NP LOG RULE ARGS...: tiny.ini on NP ranks through on_ranks
  local np=$1 log=$2 rule=$3
  shift 3
  on_ranks "$np" "$log" "$rule" "$dtrain" "$src/inputs/tiny.ini" "--data.path=$work/d" --model.global_batch_size=8 \
    --model.micro_batch_size=2 --training.eval_interval=0 --logging.log_interval=1 --system.tensor_model_parallel_size=1 \
    --system.pipeline_model_parallel_size=1 "$no_sample" "$given_peak" "$@"
}

case $case_name in
  import_hf_any_disk_size)
    /usr/bin/python3 "$here/hf_reference.py" write llama "$work/hf" > /dev/null || fail "writing the Llama directory"
    "$consolidate" --import-hf "$work/hf" --out "$work/ref.h5" > /dev/null || fail "the import on a large disk"
    bytes=$(stat -c %s "$work/ref.h5")
    wrote=0 refused=0
    for kb in $(seq 12 4 $((bytes / 1024 + 8))); do
      small_fs "size=${kb}k"
      "$consolidate" --import-hf "$work/hf" --out "$work/small/out.h5" > "$work/i.log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        h5diff "$work/ref.h5" "$work/small/out.h5" > "$work/diff.log" 2>&1 ||
          { head -5 "$work/diff.log"; fail "at ${kb} KiB the import said it wrote the file, but it differs from the one on a large disk"; }
        wrote=$((wrote + 1))
      else
        [ $rc -eq 2 ] || { cat "$work/i.log"; fail "at ${kb} KiB the import exited $rc, not 2"; }
        [ "$(grep -c 'ckpt-consolidate: error: .*out.h5' "$work/i.log")" -eq 1 ] || { cat "$work/i.log"; fail "at ${kb} KiB: not one error naming the file"; }
        [ -z "$(ls -A "$work/small")" ] || fail "at ${kb} KiB the failed import left $(ls -A "$work/small")"
        refused=$((refused + 1))
      fi
    done
    echo "file of $bytes bytes: written whole on $wrote filesystem sizes, refused cleanly on $refused"
    [ $wrote -gt 0 ] && [ $refused -gt 0 ] || fail "the sizes did not cover both outcomes" ;;
  save_close_fails)
    make_small_data "$tool"
    train_ranks 2 "$work/ok.log" "" --training.train_iters=2 --checkpoint.save_interval=2 "--checkpoint.dir=$work/ck"
    every_rank_exited 0 2 "$work/ok.log" || fail "the first run failed"
    # Resume at step 2; the save of step 4 fails writing shard 0's metadata as HDF5 closes it.
    train_ranks 2 "$work/fail.log" 'write@0:shard_00000.h5:2' --training.train_iters=4 --checkpoint.save_interval=2 \
      "--checkpoint.dir=$work/ck"
    [ -s "$work/injected" ] || fail "no failure was injected (test broken?)"
    every_rank_exited 2 2 "$work/fail.log" || fail "not every rank exited 2 after the shard's close failed (a crash?)"
    grep -q "dtrain: error: .*checkpoint save of step 4 failed; the previous checkpoint is untouched: .*shard_00000.h5" "$work/fail.log" ||
      fail "no clear error naming the shard"
    [ "$(cat "$work/ck/latest")" = step_00000002 ] || fail "latest is $(cat "$work/ck/latest")"
    ls -a "$work/ck" | grep -q '^\.tmp' && fail "the failed save left its temporary behind: $(ls -a "$work/ck")"
    "$consolidate" "$work/ck" --verify > /dev/null || fail "the last checkpoint does not verify"
    # The whole run on a filesystem too small for one checkpoint (about 1.6 MB).
    small_fs size=800k
    train_ranks 2 "$work/tiny.log" "" --training.train_iters=2 --checkpoint.save_interval=2 "--checkpoint.dir=$work/small/ck"
    every_rank_exited 2 2 "$work/tiny.log" || fail "not every rank exited 2 on an 800 KB checkpoint.dir (a crash?)"
    grep -q "dtrain: error: .*checkpoint save of step 2 failed" "$work/tiny.log" || fail "no clear error for the full disk"
    [ ! -e "$work/small/ck/latest" ] || fail "a checkpoint was published" ;;
  init_from_unwritable)
    make_small_data "$tool"
    /usr/bin/python3 "$here/hf_reference.py" write gpt2 "$work/hf" > /dev/null || fail "writing the GPT-2 directory"
    "$consolidate" --import-hf "$work/hf" --out "$work/ref.h5" > "$work/keys.log" || fail "import"
    keys=$(sed -n '/^\[model\]$/,$p' "$work/keys.log" | grep ' = ' | sed 's/^\([a-z_]*\) = \(.*\)$/--model.\1=\2/')
    touch "$work/a-file"
    small_fs ro,size=1m
    for dir in "$work/a-file" "$work/small/ck"; do
      # shellcheck disable=SC2086
      train_ranks 2 "$work/u.log" "" --training.train_iters=1 "--checkpoint.init_from=hf:$work/hf" "--checkpoint.dir=$dir" \
        --model.seq_length=16 $keys
      every_rank_exited 2 2 "$work/u.log" || fail "checkpoint.dir=$dir: not every rank exited 2"
      [ "$(grep -c "dtrain: error: .*checkpoint.dir" "$work/u.log")" -eq 1 ] || fail "checkpoint.dir=$dir: not one error naming checkpoint.dir"
      grep -q "unexpected failure\|MPI_ABORT" "$work/u.log" && fail "checkpoint.dir=$dir: an internal error"
    done ;;
  consolidate_fsync_fails)
    make_small_data "$tool"
    train_ranks 2 "$work/ok.log" "" --training.train_iters=2 --checkpoint.save_interval=2 "--checkpoint.dir=$work/ck"
    every_rank_exited 0 2 "$work/ok.log" || fail "training failed"
    on_ranks 2 "$work/cons.log" 'fsync:C.h5' "$consolidate" "$work/ck" --out "$work/C.h5"
    [ -s "$work/injected" ] || fail "no failure was injected (test broken?)"
    every_rank_exited 2 2 "$work/cons.log" || fail "not every rank exited 2"
    grep -q "ckpt-consolidate: error: .*C.h5.*sync" "$work/cons.log" || fail "no clear error"
    [ -z "$(ls "$work" | grep '^C\.h5')" ] || fail "left behind: $(ls "$work" | grep '^C\.h5')" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS

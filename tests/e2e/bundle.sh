#!/usr/bin/env bash
# The portable bundle as a user on another machine meets it: tools/make-bundle, the archive unpacked
# into another directory, then, with a cleared environment (LD_LIBRARY_PATH only the bundle's):
#   - ldd of every executable and library of the bundle resolves nothing outside it except glibc,
#     libstdc++/libgcc and the CUDA libraries;
#   - mpirun -np 4 dtrain inputs/tiny.ini trains and checkpoints, and every shared object the ranks and
#     mpirun load (plugins included, as the loader reports them: LD_DEBUG=files) comes from the bundle
#     or that same list; ckpt-consolidate --verify of the checkpoint passes;
#   - the archive is under 60 MiB. Both sizes are printed.
#   bundle.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
here=$(dirname "$0")
source "$here/lib.sh"
allowed='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia)[.-]'
# PMIx searches its build-time plugin directory before the bundle's: on this machine it exists, on
# the machines the bundle is for it does not. A plugin from there counts when the bundle has it too.
pmix_system=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
outside() {  # outside BUNDLE: reads "name path" lines, prints those resolved outside BUNDLE that are not allowed
  awk -v b="$1" -v re="$allowed" -v ps="$pmix_system/" '$2 !~ "^" b "/" {
    n = $1; sub(".*/", "", n);
    if (n ~ re) next;
    if (index($2, ps) == 1 && system("test -e \"" b "/lib/pmix/" n "\"") == 0) next;
    print }'
}

"$src/tools/make-bundle" --build "$build" "$work/dtrain-bundle" || fail "make-bundle"
archive=$work/dtrain-bundle.tar.gz
size=$(stat -c %s "$archive")
echo "archive $(( size / 1048576 )) MiB, unpacked $(du -sm "$work/dtrain-bundle" | cut -f1) MiB"
[ "$size" -lt $(( 60 * 1048576 )) ] || fail "the archive is $(( size / 1048576 )) MiB, more than 60"
mkdir "$work/elsewhere"
tar -C "$work/elsewhere" -xzf "$archive" || fail "unpacking"
rm -rf "$work/dtrain-bundle"  # nothing may refer to where it was built
b=$work/elsewhere/dtrain-bundle
# CUDA builds: the CUDA libraries come from the machine, as `module load cuda` would provide them.
cuda_libs=$(ldconfig -p | awk '/libcudart.so/ {print $NF; exit}' | xargs -r dirname)
[ -z "$cuda_libs" ] && cuda_libs=/usr/local/cuda/lib

in_bundle() {  # in_bundle COMMAND...: runs with a cleared environment and the bundle's env.sh
  env -i PATH=/usr/bin:/bin HOME="$HOME" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH="$cuda_libs" \
    bash -c 'source "$0/env.sh"; "$@"' "$b" "$@"
}

bad=$(in_bundle bash -c 'find "$OPAL_PREFIX/bin" "$OPAL_PREFIX/lib" -type f | while read -r f; do
  ldd "$f" 2>/dev/null | awk "/=> \\// {print \$1, \$3}"; done' | sort -u | outside "$b")
[ -z "$bad" ] || { echo "$bad"; fail "libraries resolve outside the bundle"; }
echo "ldd: every library of the bundle resolves inside it (or to glibc, the compiler runtime, CUDA)"

make_small_data "$b/bin/dtrain-data"
in_bundle bash -c 'LD_DEBUG=files LD_DEBUG_OUTPUT="$0/ld" mpirun -np 4 dtrain "$1" "--data.path=$2" --training.train_iters=3 \
  --training.eval_interval=0 --logging.log_interval=1 "--checkpoint.dir=$3"' "$work" "$src/inputs/tiny.ini" "$work/d" "$work/ck" \
  > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "mpirun -np 4 dtrain from the bundle"; }
grep '^step 3/3' "$work/run.log" || fail "no step 3"
loaded=$(cat "$work"/ld.* | grep -o 'calling init: [^ ]*' | awk '{print $3, $3}' | sort -u)
[ "$(wc -l <<<"$loaded")" -gt 20 ] || fail "the loader reported only $(wc -l <<<"$loaded") objects (LD_DEBUG not honoured?)"
bad=$(outside "$b" <<<"$loaded")
[ -z "$bad" ] || { echo "$bad"; fail "the run loaded libraries from outside the bundle"; }
echo "run: $(wc -l <<<"$loaded") shared objects loaded by mpirun and the ranks, all from the bundle (or glibc, the compiler runtime, CUDA)"
in_bundle ckpt-consolidate "$work/ck" --verify || fail "ckpt-consolidate --verify from the bundle"

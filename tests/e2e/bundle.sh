#!/usr/bin/env bash
# The portable bundle as a user on another machine meets it: tools/make-bundle into one directory, then
# one case in another directory, with a cleared environment:
#   runs_elsewhere  the xz archive (under 45 MiB, so that it and the repository fit a 64 MiB transfer to a
#     GPU machine with room for a few variant binaries; both sizes printed), unpacked; LD_LIBRARY_PATH
#     only the machine's CUDA libraries (as `module load cuda` gives them):
#     - ldd of every executable and library of the bundle resolves nothing outside it except glibc,
#       libstdc++/libgcc and the CUDA libraries;
#     - mpirun -np 4 dtrain inputs/tiny.ini trains and checkpoints, and every shared object the ranks and
#       mpirun load (plugins included, as the loader reports them: LD_DEBUG=files) comes from the bundle
#       or that same list; ckpt-consolidate --verify of the checkpoint passes;
#   wheel_libs  the directory moved (make-bundle --no-archive); CUDA only as NVIDIA's python wheels lay it out (site-packages/nvidia/cu13/lib,
#     site-packages/nvidia/nccl/lib, made here from the machine's libraries, on PYTHONPATH), nothing on
#     LD_LIBRARY_PATH, no CUDA_HOME, DTRAIN_CUDA_DIRS pointing nowhere: env.sh says each GPU library came
#     from the wheels, and the loader without its cache (this machine's ld.so.cache knows the CUDA install)
#     resolves every library of every executable and library of the bundle, the GPU ones into the wheels
#     (cuBLAS and cuBLASLt, which dtrain opens on demand, through env.sh's LD_LIBRARY_PATH).
#     Skipped (77) in builds without the CUDA backend.
#   bundle.sh CASE BUILD_DIR SOURCE_DIR
set -u
case=$1 build=$2 src=$3
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

mkdir "$work/elsewhere"
if [ "$case" = runs_elsewhere ]; then
  "$src/tools/make-bundle" --build "$build" "$work/dtrain-bundle" || fail "make-bundle"
  archive=$work/dtrain-bundle.tar.xz
  size=$(stat -c %s "$archive")
  echo "archive $(( size / 1048576 )) MiB, unpacked $(du -sm "$work/dtrain-bundle" | cut -f1) MiB"
  [ "$size" -lt $(( 45 * 1048576 )) ] || fail "the archive is $(( size / 1048576 )) MiB, more than 45"
  tar -C "$work/elsewhere" -xJf "$archive" || fail "unpacking"
  rm -rf "$work/dtrain-bundle"  # nothing may refer to where it was built
else
  "$src/tools/make-bundle" --build "$build" --no-archive "$work/dtrain-bundle" || fail "make-bundle"
  [ ! -e "$work/dtrain-bundle.tar.xz" ] || fail "make-bundle --no-archive wrote an archive"
  mv "$work/dtrain-bundle" "$work/elsewhere/" || fail "moving the bundle"
fi
b=$work/elsewhere/dtrain-bundle
# CUDA builds: the CUDA libraries come from the machine, as `module load cuda` would provide them.
cuda_libs=$(ldconfig -p | awk '/libcudart.so/ {print $NF; exit}' | xargs -r dirname)
[ -z "$cuda_libs" ] && cuda_libs=/usr/local/cuda/lib

gpu_env=(LD_LIBRARY_PATH="$cuda_libs")  # how the machine provides CUDA (the wheel case changes it)
in_bundle() {  # in_bundle COMMAND...: runs with a cleared environment and the bundle's env.sh
  env -i PATH=/usr/bin:/bin HOME="$HOME" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1 "${gpu_env[@]}" \
    bash -c 'source "$0/env.sh"; "$@"' "$b" "$@"
}

runs_elsewhere() {
  local bad loaded
  bad=$(in_bundle bash -c 'find "$OPAL_PREFIX/bin" "$OPAL_PREFIX/lib" -type f | while read -r f; do
    ldd "$f" 2>/dev/null | awk "/=> \\// {print \$1, \$3}"; done' | sort -u | outside "$b")
  [ -z "$bad" ] || { echo "$bad"; fail "libraries resolve outside the bundle"; }
  echo "ldd: every library of the bundle resolves inside it (or to glibc, the compiler runtime, CUDA)"
  # shellcheck disable=SC2016
  in_bundle bash -c '[ "${PMIX_MCA_pcompress_base_silence_warning:-}" = 1 ]' || fail "env.sh does not silence a foreign PMIx's zlib warning"

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
}

wheel_libs() {
  local loader=/lib64/ld-linux-x86-64.so.2 site=$work/wheels/site-packages lib dir f n=0 listed
  [ -s "$b/gpu-libs.txt" ] || { echo "skipped: this build has no CUDA backend (the bundle's gpu-libs.txt is empty)"; exit 77; }
  "$loader" --inhibit-cache --list /bin/true > /dev/null || fail "$loader --inhibit-cache --list does not work here"
  # The wheels' layout: CUDA 13's runtime and cuBLAS in nvidia/cu13/lib, NCCL in nvidia/nccl/lib. Hard
  # links where the file system allows (cuBLASLt alone is 540 MB), else copies.
  while read -r lib; do
    case $lib in libnccl*) dir=$site/nvidia/nccl/lib ;; libcudnn*) dir=$site/nvidia/cudnn/lib ;; *) dir=$site/nvidia/cu13/lib ;; esac
    mkdir -p "$dir"
    [ -e "$cuda_libs/$lib" ] || fail "$lib (named in gpu-libs.txt) is not in $cuda_libs"
    ln "$(readlink -f "$cuda_libs/$lib")" "$dir/$lib" 2> /dev/null || cp -L "$cuda_libs/$lib" "$dir/$lib" || fail "copying $lib"
  done < "$b/gpu-libs.txt"
  gpu_env=(LD_LIBRARY_PATH= DTRAIN_CUDA_DIRS="$work/no-cuda-here" PYTHONPATH="$site")
  # Every ELF file of the bundle, each listed by the loader without ld.so.cache, in one cleared environment.
  in_bundle bash -c 'find "$OPAL_PREFIX/bin" "$OPAL_PREFIX/lib" -type f | while read -r f; do
      [ "$(head -c 4 "$f" | od -An -c | tr -d " ")" = "177ELF" ] || continue
      patchelf --print-interpreter "$f" > /dev/null 2>&1 || [[ $f == *.so* ]] || continue  # static (the dtrain launcher): nothing to load
      echo "== $f"; "$0" --inhibit-cache --list "$f" 2>&1 || echo "   (the loader failed: exit $?)"; done' "$loader" \
    > "$work/list.txt" 2> "$work/env.log" || fail "sourcing env.sh or listing failed"
  cat "$work/env.log"
  if grep -qE "not found|the loader failed" "$work/list.txt"; then
    awk '/^==/ {f = $2} /not found|error while loading|the loader failed/ {print f ": " $0}' "$work/list.txt" | head -20
    fail "a library of the bundle does not resolve without the loader cache"
  fi
  while read -r lib; do
    grep -q "^dtrain env: $lib from $site/nvidia/[a-z0-9]*/lib (python3 wheels)\$" "$work/env.log" ||
      fail "env.sh did not say that $lib came from the python3 wheels"
    listed=$(awk -v f="$b/bin/dtrain-main" '$0 == "== " f {on = 1; next} /^==/ {on = 0} on' "$work/list.txt" | grep -F "$lib =>")
    if [ -z "$listed" ] && grep -qaF "$lib" "$b/bin/dtrain-main"; then
      # Opened on demand (cuBLAS: dlopen searches LD_LIBRARY_PATH first): the first of its folders, as
      # env.sh sets it, that holds the library.
      # shellcheck disable=SC2016
      listed="$lib => $(in_bundle bash -c 'IFS=:; for d in $LD_LIBRARY_PATH; do [ -e "$d/$0" ] && { echo "$d/$0"; exit; }; done' "$lib") (opened on demand)"
    fi
    [[ $listed == *"=> $site/nvidia/"*"/lib/$lib "* ]] || { echo "$listed"; fail "dtrain-main's $lib does not resolve into the wheels"; }
    echo "$lib: $(awk '{print $3}' <<<"$listed")"
    n=$((n + 1))
  done < "$b/gpu-libs.txt"
  echo "wheels: $(grep -c '^==' "$work/list.txt") ELF files resolve every library without ld.so.cache; dtrain-main's $n GPU libraries come from the wheels"
}

case $case in
  runs_elsewhere|wheel_libs) "$case" ;;
  *) fail "unknown case '$case'" ;;
esac
echo PASS

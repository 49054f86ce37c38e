#!/usr/bin/env bash
# `module load dtrain` with the real Lmod: the Lua modulefile, the Tcl one (Lmod reads Tcl too), and
# site prerequisites from DTRAIN_PREREQ_MODULES. dtrain and ckpt-consolidate must land on PATH.
#   modules.sh SOURCE_DIR DTRAIN CKPT_CONSOLIDATE
set -u
src=$1 dtrain=$2 consolidate=$3
fail() { echo "FAIL: $*"; exit 1; }
[ "$(dirname "$dtrain")" = "$src/build" ] || { echo "SKIP: the modulefiles point at $src/build; this build is elsewhere"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A stand-in for a site module (an MPI stack, say) that the site lists as a prerequisite.
mkdir -p "$work/site/siteprereq"
printf 'setenv("SITE_PREREQ_LOADED", "yes")\n' > "$work/site/siteprereq/1.0.lua"
mkdir -p "$work/tcl/dtrain" && cp "$src/modules/dtrain/0.1.0" "$work/tcl/dtrain/0.1.0"

check() {  # check LABEL MODULEPATH_DIR [ENV...]
  local label=$1 dir=$2; shift 2
  out=$(env "$@" bash -c 'source /usr/share/lmod/lmod/init/bash && module use "$1" && module use "$2" && module load dtrain &&
        echo "DTRAIN_HOME=$DTRAIN_HOME" && echo "which=$(command -v dtrain) $(command -v ckpt-consolidate)" &&
        dtrain --version && echo "prereq=${SITE_PREREQ_LOADED:-no}"' _ "$dir" "$work/site" 2>&1)
  echo "$label:"; echo "$out" | sed 's/^/  /'
  grep -q "^which=$dtrain $consolidate$" <<<"$out" || fail "$label: dtrain/ckpt-consolidate not on PATH from the module"
  grep -q "^dtrain 0.1.0" <<<"$out" || fail "$label: dtrain --version"
  grep -q "^DTRAIN_HOME=$src$" <<<"$out" || fail "$label: DTRAIN_HOME"
}
check "Lmod, Lua modulefile" "$src/modules"
check "Lmod, Tcl modulefile" "$work/tcl" DTRAIN_HOME_OVERRIDE="$src"
check "site prerequisites" "$src/modules" DTRAIN_PREREQ_MODULES=siteprereq
grep -q "^prereq=yes" <<<"$out" || fail "the site prerequisite module was not loaded"
echo PASS

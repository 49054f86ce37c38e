#!/usr/bin/env bash
# Nothing in the repository refers to files outside it (the workspace around a checkout, such as a
# shared/ or .library/ folder next to it).
#   self_contained.sh SOURCE_DIR
set -u
cd "$1" || exit 1
pattern='\.\./(shared|\.library)/'
hits=$(grep -rnE "$pattern" CMakeLists.txt README.md .ci cmake docs inputs kernels modules slurm src tests tools 2>/dev/null |
       grep -v '^tests/e2e/self_contained.sh:')
if [ -n "$hits" ]; then
  echo "FAIL: references outside the repository:"
  echo "$hits"
  exit 1
fi
echo PASS

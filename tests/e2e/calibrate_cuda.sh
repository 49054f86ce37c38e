#!/usr/bin/env bash
# dtrain calibrate --device cuda (label gpu; skips, exit 77, without a CUDA build or a visible GPU): one
# rank on one GPU writes a description of a cuda device, with the GPU's memory, its fp32 and bf16
# cuBLAS peaks (tensor cores: bf16 above fp32; on an H100 or H200 at least 300 TFLOP/s), an efficiency
# table (also per width) and the rates to and from host memory; dtrain plan reads it back.
#   calibrate_cuda.sh DTRAIN SOURCE_DIR
set -u
dtrain=$1 src=$2
source "$(dirname "$0")/lib.sh"
"$dtrain" --version | grep -q "CUDA backend: built" || { echo "this dtrain was built without CUDA"; exit 77; }
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q "^GPU" || { echo "no GPU visible"; exit 77; }

timeout -k 5 120 mpirun -np 1 "$dtrain" calibrate --device cuda --out "$work/gpu.ini" --quick > "$work/cal.txt" 2>&1 ||
  { cat "$work/cal.txt"; fail "dtrain calibrate --device cuda exited $?"; }
cat "$work/cal.txt" "$work/gpu.ini"
grep -q '^device = cuda$' "$work/gpu.ini" || fail "the description is not of a cuda device"
value() { sed -n "s/^$1 = \([0-9.e+-]*\)$/\1/p" "$work/gpu.ini"; }
fp32=$(value peak_tflops_fp32) bf16=$(value peak_tflops_bf16) memory=$(value memory_gb)
echo "fp32 peak $fp32 TFLOP/s, bf16 peak $bf16 TFLOP/s, memory $memory GB"
awk -v a="$fp32" -v b="$bf16" -v m="$memory" 'BEGIN { exit !(a > 0 && b > a && m > 1) }' ||
  fail "expected a bf16 peak above the fp32 one and more than 1 GB of GPU memory"
# A GPU's GEMMs must be timed at sizes that fill it: at a CPU's sizes launch latency sets the time (an
# H100 gave 33 TFLOP/s). cuBLAS reaches about 750 of an H100's or H200's 989 dense bf16 TFLOP/s; 300 is
# far below that and far above any launch-bound reading.
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $gpu_name in
  *H100* | *H200*) awk -v b="$bf16" 'BEGIN { exit !(b >= 300) }' || fail "$gpu_name: bf16 peak $bf16 TFLOP/s, expected at least 300" ;;
esac
grep -qE '^gemm_efficiency = [0-9.e+]+:[0-9.e-]+(, [0-9.e+]+:[0-9.e-]+){3,}$' "$work/gpu.ini" || fail "no efficiency table"
# Offload's rates: a GPU's copies to and from pinned host memory (PCIe: 10-64 GB/s; C2C up to 450) and
# the host's memory, both measured, and the efficiency per GEMM width.
for key in host_link_gb_s host_memory_bandwidth_gb_s gemm_efficiency_by_width; do
  grep -qE "^$key = " "$work/gpu.ini" || fail "no $key in the GPU's description"
done
awk -F' = ' '/^host_link_gb_s/ { exit !($2 >= 5 && $2 <= 1000) }' "$work/gpu.ini" || fail "host_link_gb_s outside 5-1000 GB/s"
"$dtrain" plan "$src/inputs/tiny.ini" --cluster "$work/gpu.ini" --top 1 > "$work/plan.txt" 2>&1 ||
  { cat "$work/plan.txt"; fail "dtrain plan could not read the GPU's description"; }
echo PASS

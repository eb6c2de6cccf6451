#!/usr/bin/env bash
# Everything a lent GPU is needed for, in one call within one time budget (device time is scarce:
# 15 minutes a session, machine start included). On the device machine, from the repo root:
#
#     bash bench/gpu_session.sh 520        # seconds this call may take; results under $OUT
#
# In order, each step bounded by the time left: the two profiles of issue 20's missed target, the
# CUDA section of docs/benchmarks.md, the fused-kernel tests on the GPU, then protocol v2's runs of
# study 1 at seed 0 (their seconds time the protocol on a GPU: copy $OUT/gpu/v2/methods.json to
# results/gpu/v2/ and re-render with `python -m lab study --render`). Wheels in .whl/ (faiss,
# pytorch-metric-learning), if carried, are installed first for the peers.
set -u
budget=${1:-520}
start=$(date +%s)
out=${OUT:-/tmp/gpu_session}
mkdir -p "$out"
log="$out/session.log"
left() { echo $(( budget - ($(date +%s) - start) )); }
step() {  # step NAME MIN_SECONDS CMD...: runs CMD under the time left, output to $out/NAME.txt
    local name=$1 need=$2; shift 2
    local t; t=$(left)
    if (( t < need )); then echo "$name: not run ($t s left, needs $need)" | tee -a "$log"; return; fi
    local s; s=$(date +%s)
    timeout "$t" "$@" > "$out/$name.txt" 2>&1
    echo "$name: exit $? after $(( $(date +%s) - s )) s" | tee -a "$log"
}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,memory.total,utilization.gpu --format=csv > "$out/gpu.txt" 2>&1
step profile_16384 40 python3 -m bench.gpu --profile smooth_ap:16384
step profile_1024 40 python3 -m bench.gpu --profile smooth_ap:1024
step benchmarks 320 python3 -m bench.gpu --sections losses,peers,amp,eval,train --deadline 300
cp docs/benchmarks.md "$out/benchmarks.md"
step fused_tests 60 python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_losses_fused.py
# Runs are saved one by one with their seconds: one cut short by the timeout loses only itself.
step study_v2 60 python3 -m lab study methods --protocol v2 --seeds 1 --device cuda --out "$out/gpu" --no-render
echo "total $(( $(date +%s) - start )) s of $budget" | tee -a "$log"

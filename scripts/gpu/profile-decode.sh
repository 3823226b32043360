#!/usr/bin/env bash
# Runs on the GPU machine as gpu-bundle/profile-decode.sh SPEC... (SPEC = MODEL:BATCH:CONTEXT, e.g. 8B:1:512):
# each case's decode steps under Nsight Compute, every kernel of the decode graph profiled as its own node with
# its duration only (clocks and caches left alone), then kernel_profile.py's table of the last step. Output
# under $OUT (default /tmp/mstar-gpu): profile-SPEC.csv and profile-SPEC.md. With MSTAR_PROFILE_STEP=first the table is
# of the first step, the prompt's prefill, instead.
set -uo pipefail
OUT=${OUT:-/tmp/mstar-gpu}
mkdir -p "$OUT"
BUNDLE=$(cd "$(dirname "$0")" && pwd)
source "$BUNDLE/cublas-path.sh"
status=0
for spec in "$@"; do
    name=${spec//:/-}
    timeout 240 ncu --clock-control none --cache-control none --graph-profiling node \
        --metrics gpu__time_duration.sum --csv --print-units base --log-file "$OUT/profile-$name.csv" \
        "$BUNDLE/jre/bin/java" -Xmx16g -cp "$BUNDLE/lib/*" org.mstar.device.cuda.harness.GpuHarness \
        --out "$OUT/profile-$name" --no-checks --no-perf --profile-decode "$spec" > "$OUT/profile-$name.log" 2>&1 \
        || { echo "profile $spec failed (exit $?): tail of its log:"; tail -5 "$OUT/profile-$name.log"; status=1; continue; }
    echo "## Decode step $spec, kernel by kernel"
    python3 "$BUNDLE/kernel_profile.py" "$OUT/profile-$name.csv" | tee "$OUT/profile-$name.md"
done
exit "$status"

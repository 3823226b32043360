#!/usr/bin/env bash
# Runs on the GPU machine as gpu-bundle/run-whisper.sh (scripts/build-gpu-bundle.sh copies it there): writes a
# small random Whisper checkpoint with transformers' references (write_whisper_fixtures.py, heads of 64, the GPU
# kernels' head dims), runs the Whisper harness on it (fp32 and bf16 fidelity against transformers and decode graphs
# against eager, then decode throughput on whisper-small and whisper-large-v3 geometries, eager and with decode
# graphs at batch 1 and 16, unless --no-perf), and transformers' own bf16 band on
# the same checkpoint. Everything lands under $OUT (default /tmp/mstar-gpu):
# whisper.md, torch_whisper.md, whisper.log, fixture.log.
set -uo pipefail
OUT=${OUT:-/tmp/mstar-gpu}
mkdir -p "$OUT"
BUNDLE=$(cd "$(dirname "$0")" && pwd)
FIXTURES=$(mktemp -d)
FIXTURE=$FIXTURES/whisper
PYTHONUNBUFFERED=1 python3 "$BUNDLE/write_whisper_fixtures.py" "$FIXTURES" --d-model 256 --heads 4 \
    > "$OUT/fixture.log" 2>&1 || { tail -20 "$OUT/fixture.log"; exit 2; }
grep -E "tokens|transformers" "$OUT/fixture.log" | cut -c1-200
date -u +"%Y-%m-%dT%H:%M:%SZ" | tee "$OUT/date.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/nvidia-smi.txt"
source "$BUNDLE/cublas-path.sh"
# checks, then transformers' bf16 band, then the throughput tables (the longest part) last
timeout 240 "$BUNDLE/jre/bin/java" -Xmx16g -cp "$BUNDLE/lib/*" org.mstar.device.cuda.harness.WhisperHarness \
    --fixture "$FIXTURE" --out "$OUT" --no-perf 2>&1 | tee "$OUT/whisper.log"
status=${PIPESTATUS[0]}
PYTHONUNBUFFERED=1 timeout 120 python3 "$BUNDLE/whisper_reference.py" "$FIXTURE" "$OUT/torch_whisper.md" 2>&1 \
    | tail -30
case " $* " in
    *" --no-perf "*) ;;
    *) timeout 480 "$BUNDLE/jre/bin/java" -Xmx16g -cp "$BUNDLE/lib/*" org.mstar.device.cuda.harness.WhisperHarness \
           --out "$OUT" --perf-only 2>&1 | tee "$OUT/whisper-perf.log" ;;
esac
exit "$status"

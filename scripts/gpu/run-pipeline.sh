#!/usr/bin/env bash
# Runs on the GPU machine as <bundle>/bin/run-pipeline.sh, after every part of the bundle built by
# scripts/gpu/build-pipeline-bundle.sh arrived (jre/, lib1/ ...). Checks each file of bin/MANIFEST, records the
# GPU, samples its utilisation every 200 ms while the command runs, and runs `mstar ARGS` (e.g. bench-pipeline
# --device cuda:0 --random llama-3.1-8b.json). Output lands under $OUT (/tmp/mstar-pipeline elsewhere):
# run.log (everything printed, with the date and GPU state), gpu-util.csv and, for bench-pipeline, the mean
# utilisation per phase (gpu-phases.txt).
set -uo pipefail
BUNDLE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/mstar-pipeline}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1

missing=0
while read -r size path; do
    if [ ! -f "$BUNDLE/$path" ] || [ "$(stat -c %s "$BUNDLE/$path")" != "$size" ]; then
        echo "missing or incomplete: $path" >&2
        missing=$((missing + 1))
    fi
done < "$BUNDLE/bin/MANIFEST"
if [ "$missing" -gt 0 ]; then
    echo "$missing bundle files missing: send every part (jre, lib1, lib2, ...) before running" >&2
    exit 2
fi

date -u +"%Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv
# cuBLAS: the shim dlopens libcublas.so.13, so its folder must be on the loader path.
cublas=$(ldconfig -p | awk '/libcublas\.so\.13 /{print $NF; exit}')
if [ -z "$cublas" ]; then
    cublas=$(find / -xdev -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
fi
echo "libcublas: ${cublas:-not found}"
[ -n "$cublas" ] && export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
    > "$OUT/gpu-util.csv" 2>/dev/null &
sampler=$!
# HOME for DJL's and RocksDB's native library extraction; the tokenizer never downloads (pinned to its bundled build)
export HOME=${HOME:-/tmp}
"$BUNDLE/jre/bin/java" -Xmx${JAVA_HEAP:-32g} ${JAVA_OPTS:-} --add-opens=java.base/java.util=ALL-UNNAMED \
    --add-opens=java.base/java.lang=ALL-UNNAMED -cp "$(ls -d "$BUNDLE"/lib*/ | sed 's|$|*|' | paste -sd:)" \
    org.mstar.jobs.Mstar "$@" 2>&1 | tee "$OUT/java.tmp"
status=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null

# Mean utilisation within each phase the benchmark reported ("done: NAME in S s [START-END ms]").
python3 - "$OUT/java.tmp" "$OUT/gpu-util.csv" <<'PY' | tee "$OUT/gpu-phases.txt"
import re, sys, datetime
samples = []
for line in open(sys.argv[2]):
    parts = [p.strip() for p in line.split(',')]
    try:
        t = datetime.datetime.strptime(parts[0], '%Y/%m/%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc)
        samples.append((t.timestamp() * 1000, float(parts[1])))
    except (ValueError, IndexError):
        pass
for line in open(sys.argv[1]):
    m = re.match(r'done: (.+) in [0-9.]+ s \[(\d+)-(\d+) ms\]$', line.rstrip('\n'))
    if m:
        start, end = float(m.group(2)), float(m.group(3))
        inside = [u for t, u in samples if start <= t <= end]
        mean = sum(inside) / len(inside) if inside else float('nan')
        print(f"{m.group(1)}\tGPU util {mean:.0f}% ({len(inside)} samples)")
PY
rm -f "$OUT/java.tmp"
exit "$status"

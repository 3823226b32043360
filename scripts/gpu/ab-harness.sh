#!/usr/bin/env bash
# Runs on the GPU machine as gpu-bundle/ab-harness.sh [HARNESS ARGUMENTS]: the harness with the same arguments
# (default: the pre-planned decode steps table alone) four times, alternating the baseline build and this one
# (baseline, current, baseline, current), so that two builds are compared on one machine: machines of one kind
# differ by a few per cent, as much as a change may move a row. Needs gpu-bundle/baseline/ from
# `scripts/build-gpu-bundle.sh --baseline REV`. Each run's files land in $OUT/ab-ROUND-BUILD/ (default OUT
# /tmp/mstar-gpu); stdout gets each run's table rows, labelled. Without a --seed the runs share seed 1.
set -uo pipefail
OUT=${OUT:-/tmp/mstar-gpu}
BUNDLE=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$BUNDLE/baseline" ]; then
    echo "no $BUNDLE/baseline: build the bundle with scripts/build-gpu-bundle.sh --baseline REV" >&2
    exit 2
fi
[ $# -gt 0 ] || set -- --no-checks --no-perf --preplan-perf
# one seed for every run, so both builds draw the same weights and requests and their transcript digests compare
case " $* " in *" --seed "*) ;; *) set -- "$@" --seed 1 ;; esac
source "$BUNDLE/cublas-path.sh"
echo "baseline $(cat "$BUNDLE/baseline/REVISION" 2>/dev/null || echo unknown), harness arguments: $*"
status=0
for round in 1 2; do
    for build in baseline current; do
        # the first jar on the class path that holds a class or resource (the fatbin, the JNI shim) wins
        cp="$BUNDLE/lib/*"
        [ "$build" = baseline ] && cp="$BUNDLE/baseline/*:$BUNDLE/lib/*"
        dir="$OUT/ab-$round-$build"
        mkdir -p "$dir"
        timeout 420 "$BUNDLE/jre/bin/java" -Xmx16g -cp "$cp" org.mstar.device.cuda.harness.GpuHarness --out "$dir" "$@" \
            > "$dir/harness.log" 2>&1 || { echo "$build run $round failed: tail of its log:"; tail -5 "$dir/harness.log"; status=1; }
        grep -h '^| [^-]' "$dir/perf.md" 2>/dev/null | grep -v '^| model' | sed "s/^/$build $round /"
    done
done
exit "$status"

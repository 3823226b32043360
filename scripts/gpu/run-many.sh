#!/usr/bin/env bash
# Runs on the GPU machine as gpu-bundle/run-many.sh: several harness runs in one sitting, each under its own time
# limit and all within a budget, with a short report of each (a machine is often lent for minutes, and a harness run
# cut by a limit prints its check table only at its end). Each SPEC is NAME:SECONDS:ARGS, the ARGS run-harness.sh's
# (spaces or commas between them), e.g.
#   bash gpu-bundle/run-many.sh --budget 560 'attn:120:--no-perf --attention-only' 'moe:200:--no-checks --moe-perf'
# Everything lands under $OUT/NAME (default OUT /tmp/mstar-gpu) and $OUT/NAME.log; the report gives each run's exit
# status and time, its checks summary and failed rows, and the tables it printed (those of a run cut short
# included: the harness prints each table as soon as it is measured). A run that would start with less than 30 s of
# the budget left is skipped. A bundle whose runtime was packed as jre.tar.xz (to travel in less room) is unpacked
# to $TMPDIR once per machine.
set -uo pipefail
OUT=${OUT:-/tmp/mstar-gpu}
BUNDLE=$(cd "$(dirname "$0")" && pwd)
budget=600
if [ "${1:-}" = "--budget" ]; then
    budget=${2:?--budget needs seconds}
    shift 2
fi
if [ ! -x "$BUNDLE/jre/bin/java" ] && [ -f "$BUNDLE/jre.tar.xz" ]; then
    jre=${TMPDIR:-/tmp}/mstar-jre
    [ -x "$jre/bin/java" ] || { mkdir -p "$jre" && tar xJf "$BUNDLE/jre.tar.xz" -C "$jre"; }
    rm -rf "$BUNDLE/jre"
    ln -s "$jre" "$BUNDLE/jre"
fi
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader
start=$(date +%s)
for spec in "$@"; do
    name=${spec%%:*}
    rest=${spec#*:}
    limit=${rest%%:*}
    args=${rest#*:}
    args=${args//,/ }
    left=$(( budget - ($(date +%s) - start) ))
    if [ "$left" -lt 30 ]; then
        echo "=== $name skipped: ${left} s of the budget left"
        continue
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$(date +%s)
    # shellcheck disable=SC2086 # the harness arguments are words
    OUT="$OUT/$name" timeout "$limit" bash "$BUNDLE/run-harness.sh" $args > "$OUT/$name.log" 2>&1
    status=$?
    cut=""
    [ "$status" -eq 124 ] && cut=", cut by its limit"
    echo "=== $name: exit $status after $(( $(date +%s) - t0 )) s (limit $limit s$cut)"
    grep -E "checks passed" "$OUT/$name.log" | tail -1
    grep -E "^\| .*\| FAIL \||threw" "$OUT/$name.log" | head -20
    # the tables, without the check table (its failed rows are above)
    grep -E "^## |^\|" "$OUT/$name.log" \
        | grep -vE "\| (PASS|FAIL) \||^\| op \| shape \||^\|---\|---\|---\|---\|---\|---\|---\|---\|$" \
        | head -"${MSTAR_REPORT_LINES:-80}"
done

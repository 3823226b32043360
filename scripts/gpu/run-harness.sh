#!/usr/bin/env bash
# Runs on the GPU machine as gpu-bundle/run-harness.sh (scripts/build-gpu-bundle.sh copies it there with
# the runtime and jars, so the bundle is all the machine needs). Everything it prints also lands under
# $OUT (default /tmp/mstar-gpu): nvidia-smi state, the harness log and
# tables, and the torch comparison (GEMMs; with --prefill-perf, the prefill forward instead; with --decode-perf,
# the CUDA-graph decode loop; with --fp8-perf or --fp8-gemm-perf, torch._scaled_mm at the W8A8 GEMM table's shapes;
# with --latent-perf, the MLA decode attention; with --hybrid-perf, the Bamba-9B-geometry decode step and prefill).
# Arguments go to the harness (e.g. --no-perf, --no-kernel-perf, --prefill-perf,
# --decode-perf, --latent-perf, --hybrid-perf, --skinny-perf, --perf-table, --no-checks, --preplan-perf, --engine-layers 8,32, --seed N); with
# --perf-table, perf_table.py joins the engine rows with the PyTorch peer into the one-call table;
# --no-perf --no-checks --preplan-perf gives the pre-planned decode steps table alone; with --moe-perf (run it with
# --no-checks; --moe-only runs the MoE checks), torch_moe.py joins the MoE engine rows with its PyTorch peer;
# --no-perf, --no-kernel-perf, --skinny-perf and --lora-perf also skip the torch comparison.
set -uo pipefail
OUT=${OUT:-/tmp/mstar-gpu}
mkdir -p "$OUT"
BUNDLE=$(cd "$(dirname "$0")" && pwd)
date -u +"%Y-%m-%dT%H:%M:%SZ" | tee "$OUT/date.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv \
    | tee "$OUT/nvidia-smi.txt"

source "$BUNDLE/cublas-path.sh"
echo "libcublas: ${cublas:-not found}"

# The limit leaves the torch comparison time to run inside one 10-minute device call.
timeout 420 "$BUNDLE/jre/bin/java" -Xmx16g -cp "$BUNDLE/lib/*" org.mstar.device.cuda.harness.GpuHarness --out "$OUT" "$@" \
    2>&1 | tee "$OUT/harness.log"
status=${PIPESTATUS[0]}
# The torch GEMM comparison belongs with the kernel performance tables, the torch prefill forward with the
# prefill ones.
case " $* " in
    *" --perf-table "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/perf_table.py" "$OUT" 2>&1 | tee "$OUT/torch.log" ;;
    *" --moe-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_moe.py" "$OUT" 2>&1 | tee "$OUT/torch.log" ;;
    *" --no-perf "*|*" --no-kernel-perf "*|*" --skinny-perf "*|*" --lora-perf "*) ;;
    *" --fp8-perf "*|*" --fp8-gemm-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_fp8.py" 2>&1 | tee "$OUT/torch.log" ;;
    *" --prefill-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_prefill.py" "$OUT/perf.md" 2>&1 | tee "$OUT/torch.log" ;;
    *" --decode-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_decode.py" "$OUT/perf.md" 2>&1 | tee "$OUT/torch.log" ;;
    *" --latent-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_latent.py" "$OUT/perf.md" 2>&1 | tee "$OUT/torch.log" ;;
    *" --hybrid-perf "*) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_hybrid.py" "$OUT/perf.md" 2>&1 | tee "$OUT/torch.log" ;;
    *) PYTHONUNBUFFERED=1 python3 "$BUNDLE/torch_gemm.py" 2>&1 | tee "$OUT/torch.log" ;;
esac
exit "$status"

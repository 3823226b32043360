#!/usr/bin/env bash
# Builds and runs the host emulation checks of kernels/src/main/cuda's encoder and decode attention kernels:
# needs g++ with C++20 and the CUDA headers (for the bf16 and half types), no GPU.
set -euo pipefail
cd "$(dirname "$0")"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
out=$(mktemp -d)
for checks in encoder_checks attention_decode_checks; do
    g++ -std=c++20 -O1 -pthread -w -I"$CUDA_HOME/include" -I../src/main/cuda -o "$out/$checks" "$checks.cpp"
    "$out/$checks"
done
rm -rf "$out"

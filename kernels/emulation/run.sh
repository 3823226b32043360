#!/usr/bin/env bash
# Builds and runs the host emulation checks of kernels/src/main/cuda's encoder kernels: needs g++
# with C++20 and the CUDA headers (for the bf16 and half types), no GPU.
set -euo pipefail
cd "$(dirname "$0")"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
out=$(mktemp -d)
g++ -std=c++20 -O1 -pthread -w -I"$CUDA_HOME/include" -I../src/main/cuda -o "$out/checks" encoder_checks.cpp
"$out/checks"
rm -rf "$out"

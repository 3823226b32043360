#!/usr/bin/env bash
# Builds and runs the host emulation checks of kernels/src/main/cuda's encoder, decode and prefill attention, norm, RoPE, LoRA,
# MoE, Mamba2, latent (MLA) attention, FP8-weight, FP8 activation and sampling kernels: needs g++ with C++20 and the CUDA headers
# (for the bf16 and half types), no GPU. Arguments name the checks to run (default: all); sampling_checks takes several
# minutes, as it runs 1024-thread blocks.
set -euo pipefail
cd "$(dirname "$0")"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
out=$(mktemp -d)
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(encoder_checks attention_decode_checks attention_prefill_checks norm_checks rope_checks skinny_checks lora_checks
    moe_checks mamba2_checks latent_attention_checks fp8_checks fp8_activation_checks sampling_checks)
for check in "${checks[@]}"; do
    g++ -std=c++20 -O1 -ffp-contract=off -pthread -w -I"$CUDA_HOME/include" -I../src/main/cuda -o "$out/$check" "$check.cpp"
    "$out/$check"
done
rm -rf "$out"

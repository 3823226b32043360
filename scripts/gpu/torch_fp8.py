"""The PyTorch peer of GpuHarness's W8A8 GEMM table (--fp8-perf, --fp8-gemm-perf): the same Llama-3.1-8B shapes at
the same prefill rows through torch._scaled_mm with the same scales (one fp32 scale a token, one a weight row:
row-wise scaling, fp32 accumulation without fast accumulation), beside torch.matmul in bf16, timed as the harness
times them (ten calls captured in a CUDA graph, median of event-timed replays, one copy of each weight), and the FP8
dense rate of one 8192^3 product measured in the same run. The quantise+FP8 column adds per-token quantisation of
bf16 rows in eager torch ops (amax / 448, divide, cast). torch's row-wise scaling writes bf16 only, so its LM head
row writes bf16 where the harness writes fp32 logits."""
import torch

from torch_timing import graphed_us

SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336),
          ("lm_head", 128256, 4096)]
ROWS = [2048, 8192]
SQUARE = 8192
E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def quantise_rows(x):
    """Per-token E4M3 codes and scales, as Fp8Rows.quantise defines them: amax / 448 a row (1 for zeros)."""
    amax = x.float().abs().amax(dim=1, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), scale


def weight(n, k):
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    codes, scale = quantise_rows(w)
    return w, codes, scale.reshape(1, n)


def scaled_mm(a, a_scale, w_codes, w_scale, out):
    return torch._scaled_mm(a, w_codes.t(), scale_a=a_scale, scale_b=w_scale, out_dtype=torch.bfloat16,
                            use_fast_accum=False, out=out)


def tflops(m, n, k, us):
    return 2 * m * n * k / us / 1e6


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
    _, sq_codes, sq_scale = weight(SQUARE, SQUARE)
    sq_x, sq_x_scale = quantise_rows(torch.randn(SQUARE, SQUARE, device="cuda", dtype=torch.bfloat16))
    sq_out = torch.empty(SQUARE, SQUARE, device="cuda", dtype=torch.bfloat16)
    square = tflops(SQUARE, SQUARE, SQUARE,
                    graphed_us(lambda _: scaled_mm(sq_x, sq_x_scale, sq_codes, sq_scale, sq_out)))
    del sq_codes, sq_x, sq_out
    print(f"\n## torch._scaled_mm, W8A8 GEMMs at prefill rows (row-wise scales, Llama-3.1-8B shapes)\n")
    print(f"FP8 dense rate measured in this run: {square:.0f} TFLOP/s ({SQUARE}³, torch._scaled_mm row-wise, bf16 out)\n")
    print("| proj | M | N | K | bf16 µs | bf16 TFLOP/s | FP8 µs | FP8 TFLOP/s | of FP8 rate | quantise+FP8 µs "
          "| bf16 / FP8 time |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        w, w_codes, w_scale = weight(n, k)
        for m in ROWS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            xq, x_scale = quantise_rows(x)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            bf16 = graphed_us(lambda _: torch.matmul(x, w.t(), out=out))
            fp8 = graphed_us(lambda _: scaled_mm(xq, x_scale, w_codes, w_scale, out))
            quantised = graphed_us(lambda _: scaled_mm(*quantise_rows(x), w_codes, w_scale, out))
            print(f"| {name} | {m} | {n} | {k} | {bf16:.1f} | {tflops(m, n, k, bf16):.0f} | {fp8:.1f} "
                  f"| {tflops(m, n, k, fp8):.0f} | {100 * tflops(m, n, k, fp8) / square:.0f}% | {quantised:.1f} "
                  f"| {bf16 / fp8:.2f} |", flush=True)
            del x, xq, out
        del w, w_codes
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

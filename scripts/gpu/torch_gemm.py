"""The GEMMs of a Llama-3-8B layer through torch.matmul, timed like GpuHarness's GemmBench (bf16, weights
rotated over enough copies to exceed L2, ten calls captured in a CUDA graph, median of event-timed
replays), plus the same batch-invariance probe: is row r of x[:M] @ w.T bit-identical to x[r:r+1] @ w.T?"""
import torch

from torch_timing import graphed_us

SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336)]
TOKENS = [1, 16, 128, 1024, 4096]
ROTATION_BYTES = 256 << 20


def gemm_row(name, m, n, k):
    copies = max(1, min(8, -(-ROTATION_BYTES // (2 * n * k))))
    weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    # each copy's first use stays out of the capture
    us = graphed_us(lambda i: torch.matmul(x, weights[i % copies].t(), out=outs[i % copies]), warm=copies)
    print(f"| {name} | {m} | {n} | {k} | {us:.1f} | {2 * m * n * k / us / 1e6:.1f} | {2 * n * k / us / 1e6:.2f} |",
          flush=True)


def invariance(name, n, k, sizes):
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(sizes[-1], k, device="cuda", dtype=torch.bfloat16)
    checked = min(4, sizes[-1])
    alone = [torch.matmul(x[r:r + 1], w.t()) for r in range(checked)]
    for m in sizes:
        out = torch.matmul(x[:m], w.t())
        rows = min(checked, m)
        same = sum(int(torch.equal(out[r:r + 1], alone[r])) for r in range(rows))
        diff = max(float((out[r:r + 1].float() - alone[r].float()).abs().max()) for r in range(rows))
        print(f"| {name} | {m} | {rows} | {same} | {diff:.3g} |", flush=True)


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
    print("\n## torch.matmul, Llama-3-8B layer GEMMs (bf16)\n")
    print("| proj | M (tokens) | N | K | µs | TFLOP/s | weight TB/s |\n|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        for m in TOKENS:
            gemm_row(name, m, n, k)
    gemm_row("square", 8192, 8192, 8192)
    print("\n## torch.matmul batch invariance (row r at batch M vs alone)\n")
    print("| proj | M | rows checked | bit-identical to M=1 | max abs diff |\n|---|---|---|---|---|")
    for name, n, k in (SHAPES[0], SHAPES[2]):
        invariance(name, n, k, [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096])


if __name__ == "__main__":
    main()
